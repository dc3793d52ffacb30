package stf

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// Register is a register cell a PTF test sets before sending its packet.
// P4Testgen's STF back end cannot set registers, so every value read from
// one is unknown to it and paths that depend on one are not explored; its
// PTF back end chooses the values and writes them through bfrt, which
// reaches those paths. ParsePTF reads such tests into the same Test.
type Register struct {
	Name  string // "Ingress.conn_psn"
	Index int
	Value *big.Int
}

var (
	classRE   = regexp.MustCompile(`(?m)^class (Test\d+)\(AbstractTest\):\n`)
	regRE     = regexp.MustCompile(`self\.setRegisterValue\('([\w.]+)', 0x([0-9A-Fa-f]+), (\d+)\)`)
	callRE    = regexp.MustCompile(`(?s)self\.(insertTableEntry|overrideDefaultEntry)\((.*?)\n        \)`)
	quotedRE  = regexp.MustCompile(`'([\w.$]+)'`)
	tupleRE   = regexp.MustCompile(`gc\.(KeyTuple|DataTuple)\('([\w.$]+)', 0x([0-9A-Fa-f]+)(?:, (?:prefix_len=(\d+)|0x([0-9A-Fa-f]+)))?\)`)
	igPortRE  = regexp.MustCompile(`(?m)^\s*ig_port = (\d+)$`)
	egPortRE  = regexp.MustCompile(`(?m)^\s*eg_port = (\d+)$`)
	pktRE     = regexp.MustCompile(`(?m)^\s*pkt = b'((?:\\x[0-9A-Fa-f]{2})*)'$`)
	expRE     = regexp.MustCompile(`(?m)^\s*exp_pkt = b'((?:\\x[0-9A-Fa-f]{2})*)'$`)
	dontRE    = regexp.MustCompile(`exp_pkt\.set_do_not_care\((\d+), (\d+)\)`)
	traceLnRE = regexp.MustCompile(`(?m)^    (\[.*)$`)
)

// ParsePTF reads the tests of a PTF file P4Testgen wrote (one
// TestN(AbstractTest) class per test), named prefix_N.
func ParsePTF(prefix, src string) ([]*Test, error) {
	locs := classRE.FindAllStringSubmatchIndex(src, -1)
	var out []*Test
	for i, loc := range locs {
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := src[loc[1]:end]
		name := prefix + "_" + strings.TrimPrefix(src[loc[2]:loc[3]], "Test")
		tc, err := parsePTFTest(name, body)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		out = append(out, tc)
	}
	return out, nil
}

func parsePTFTest(name, body string) (*Test, error) {
	tc := &Test{Name: name, InPort: -1, PTF: true}
	for _, m := range traceLnRE.FindAllStringSubmatch(body, -1) {
		tc.Trace = append(tc.Trace, m[1])
	}
	for _, m := range regRE.FindAllStringSubmatch(body, -1) {
		v, _ := new(big.Int).SetString(m[2], 16)
		idx, _ := strconv.Atoi(m[3])
		tc.Registers = append(tc.Registers, Register{Name: m[1], Index: idx, Value: v})
	}
	for _, m := range callRE.FindAllStringSubmatch(body, -1) {
		var e Entry
		e.Priority = -1
		for _, l := range strings.Split(m[2], "\n") {
			l = strings.TrimSpace(l)
			if q := quotedRE.FindStringSubmatch(l); q != nil && strings.HasPrefix(l, "'") {
				if e.Table == "" {
					e.Table = q[1]
				} else {
					e.Action = q[1]
				}
				continue
			}
			t := tupleRE.FindStringSubmatch(l)
			if t == nil {
				continue
			}
			if t[1] == "DataTuple" {
				v, _ := new(big.Int).SetString(t[3], 16)
				e.Params = append(e.Params, Param{Name: t[2], Value: v})
				continue
			}
			bits, _ := toBits("0x" + t[3])
			switch {
			case t[4] != "":
				n, _ := strconv.Atoi(t[4])
				if n > len(bits) {
					return nil, fmt.Errorf("key %s: prefix %d of %d bits", t[2], n, len(bits))
				}
				bits = bits[:n] + strings.Repeat("*", len(bits)-n)
			case t[5] != "":
				mask, _ := toBits("0x" + t[5])
				mask = strings.Repeat("0", max(len(bits)-len(mask), 0)) + mask
				b := []byte(bits)
				for j := range b {
					if j < len(mask) && mask[j] == '0' {
						b[j] = '*'
					}
				}
				bits = string(b)
			}
			e.Keys = append(e.Keys, Key{Name: t[2], Bits: bits})
		}
		if e.Table == "" || e.Action == "" {
			return nil, fmt.Errorf("cannot read %s(%s)", m[1], m[2])
		}
		if m[1] == "insertTableEntry" {
			tc.Adds = append(tc.Adds, e)
		} else {
			tc.Defaults = append(tc.Defaults, e)
		}
	}
	pm := pktRE.FindStringSubmatch(body)
	im := igPortRE.FindStringSubmatch(body)
	if pm == nil || im == nil {
		return nil, fmt.Errorf("no packet sent")
	}
	tc.InPort, _ = strconv.Atoi(im[1])
	tc.In = pyBytes(pm[1])
	if em := expRE.FindStringSubmatch(body); em != nil && strings.Contains(body, "verify_packet(self, exp_pkt, eg_port)") {
		gm := egPortRE.FindStringSubmatch(body)
		if gm == nil {
			return nil, fmt.Errorf("an expected packet without a port")
		}
		e := &Expected{Data: pyBytes(em[1]), Exact: true}
		e.Port, _ = strconv.Atoi(gm[1])
		e.Care = make([]byte, len(e.Data))
		for i := range e.Care {
			e.Care[i] = 0xff
		}
		for _, d := range dontRE.FindAllStringSubmatch(body, -1) {
			off, _ := strconv.Atoi(d[1])
			n, _ := strconv.Atoi(d[2])
			for b := off; b < off+n && b/8 < len(e.Care); b++ {
				e.Care[b/8] &^= 0x80 >> (b % 8)
			}
		}
		tc.Expect = e
	}
	return tc, nil
}

// pyBytes decodes the \xHH escapes of a Python bytes literal.
func pyBytes(s string) []byte {
	out := make([]byte, 0, len(s)/4)
	for i := 0; i+4 <= len(s); i += 4 {
		v, _ := strconv.ParseUint(s[i+2:i+4], 16, 8)
		out = append(out, byte(v))
	}
	return out
}
