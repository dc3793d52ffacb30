// Package stf reads the STF tests P4Testgen writes for a TNA program (one
// file per test: table entries, one input packet, the expected output
// packet with masks or none for a drop; ../shared/tools/p4testgen's
// README describes the format) and replays them against a Go model of the
// program through an adapter the model's package provides.
package stf

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Test is one STF file.
type Test struct {
	Name     string // file name without .stf
	Adds     []Entry
	Defaults []Entry // setdefault: Keys empty
	// Registers are set before the packet is sent (PTF tests only).
	Registers []Register
	// PTF says the test came from a PTF file.
	PTF    bool
	InPort int
	In     []byte
	// Expect is nil when the packet must be dropped.
	Expect *Expected
	// Trace is the file's comments (P4Testgen's trace of the path), for
	// messages.
	Trace []string
}

// Entry is an add or setdefault line.
type Entry struct {
	Table    string // control-plane name, "Ingress.ipv4_fwd"
	Priority int    // ternary and LPM tables (-1 when absent)
	Keys     []Key
	Action   string // "Ingress.forward"
	Params   []Param
}

// Key is one key field's match: the value as bits, most significant
// first, '*' for a bit that does not matter (ternary, or past an LPM
// prefix).
type Key struct {
	Name string
	Bits string
}

// Param is an action parameter.
type Param struct {
	Name  string
	Value *big.Int
}

// Expected is the packet that must leave, on Port.
type Expected struct {
	Port int
	// Data is the frame; Care has the bits of Data that must match set
	// (P4Testgen masks what it does not know: timestamps, registers,
	// checksums it does not compute). Exact says the length must match.
	Data, Care []byte
	Exact      bool
	// Odd says P4Testgen expects a frame that is not a whole number of
	// bytes (its last nibble is dropped here); no frame matches it.
	Odd bool
}

var (
	addRE  = regexp.MustCompile(`^add (\S+) (?:(\d+) )?(.*) (\S+)\((.*)\)$`)
	defRE  = regexp.MustCompile(`^setdefault (\S+) (\S+)\((.*)\)$`)
	keyRE  = regexp.MustCompile(`^([\w.$\[\]:]+):(0x[0-9A-Fa-f]+|0b[01*]+)$`)
	fileRE = regexp.MustCompile(`^(.*)_(\d+)\.stf$`)
)

// Load reads every .stf file of dir, in test number order, then the tests
// of every PTF file (.py) there, named after the file.
func Load(dir string) ([]*Test, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.stf"))
	if err != nil {
		return nil, err
	}
	num := func(f string) int {
		m := fileRE.FindStringSubmatch(filepath.Base(f))
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[2])
		return n
	}
	sort.Slice(files, func(i, j int) bool { return num(files[i]) < num(files[j]) })
	var out []*Test
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		tc, err := Parse(strings.TrimSuffix(filepath.Base(f), ".stf"), string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		out = append(out, tc)
	}
	pys, err := filepath.Glob(filepath.Join(dir, "*.py"))
	if err != nil {
		return nil, err
	}
	sort.Strings(pys)
	for _, f := range pys {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		tcs, err := ParsePTF(strings.TrimSuffix(filepath.Base(f), ".py")+"_ptf", string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		out = append(out, tcs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no .stf or .py tests", dir)
	}
	return out, nil
}

// Parse reads one STF test.
func Parse(name, src string) (*Test, error) {
	tc := &Test{Name: name, InPort: -1}
	for ln, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		where := func(err error) error { return fmt.Errorf("line %d: %v", ln+1, err) }
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			tc.Trace = append(tc.Trace, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		case strings.HasPrefix(line, "add "):
			m := addRE.FindStringSubmatch(line)
			if m == nil {
				return nil, where(fmt.Errorf("cannot read %q", line))
			}
			e := Entry{Table: m[1], Priority: -1, Action: m[4]}
			if m[2] != "" {
				e.Priority, _ = strconv.Atoi(m[2])
			}
			for _, f := range strings.Fields(m[3]) {
				km := keyRE.FindStringSubmatch(f)
				if km == nil {
					return nil, where(fmt.Errorf("cannot read key %q", f))
				}
				bits, err := toBits(km[2])
				if err != nil {
					return nil, where(err)
				}
				e.Keys = append(e.Keys, Key{Name: km[1], Bits: bits})
			}
			ps, err := params(m[5])
			if err != nil {
				return nil, where(err)
			}
			e.Params = ps
			tc.Adds = append(tc.Adds, e)
		case strings.HasPrefix(line, "setdefault "):
			m := defRE.FindStringSubmatch(line)
			if m == nil {
				return nil, where(fmt.Errorf("cannot read %q", line))
			}
			ps, err := params(m[3])
			if err != nil {
				return nil, where(err)
			}
			tc.Defaults = append(tc.Defaults, Entry{Table: m[1], Priority: -1, Action: m[2], Params: ps})
		case strings.HasPrefix(line, "packet "):
			port, hx, err := portLine(line)
			if err != nil {
				return nil, where(err)
			}
			data, err := hex.DecodeString(hx)
			if err != nil {
				return nil, where(err)
			}
			tc.InPort, tc.In = port, data
		case strings.HasPrefix(line, "expect "):
			port, hx, err := portLine(line)
			if err != nil {
				return nil, where(err)
			}
			nib, exact := strings.CutSuffix(hx, "$")
			e, err := nibbles(nib)
			if err != nil {
				return nil, where(err)
			}
			e.Port, e.Exact = port, exact
			tc.Expect = e
		default:
			return nil, where(fmt.Errorf("unknown line %q", line))
		}
	}
	if tc.InPort < 0 {
		return nil, fmt.Errorf("no packet line")
	}
	return tc, nil
}

// portLine splits a packet or expect line, "KEYWORD PORT BYTES", into its
// port and its bytes' text.
func portLine(line string) (port int, bytes string, err error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return 0, "", fmt.Errorf("cannot read %q", line)
	}
	if port, err = strconv.Atoi(f[1]); err != nil || port < 0 {
		return 0, "", fmt.Errorf("port %q: not a port number", f[1])
	}
	return port, f[2], nil
}

// nibbles reads an STF expected packet: hex digits, '*' for a nibble
// that does not matter.
func nibbles(s string) (*Expected, error) {
	odd := len(s)%2 != 0
	s = s[:len(s)-len(s)%2]
	e := &Expected{Odd: odd, Data: make([]byte, len(s)/2), Care: make([]byte, len(s)/2)}
	for i, c := range s {
		shift := uint(4 * (1 - i%2))
		if c == '*' {
			continue
		}
		v, err := strconv.ParseUint(string(c), 16, 8)
		if err != nil {
			return nil, fmt.Errorf("bad nibble %q", c)
		}
		e.Data[i/2] |= byte(v) << shift
		e.Care[i/2] |= 0xf << shift
	}
	return e, nil
}

// toBits turns "0x0A" (4 bits a digit) or "0b01*" into a bit string.
func toBits(s string) (string, error) {
	if b, ok := strings.CutPrefix(s, "0b"); ok {
		return b, nil
	}
	h := strings.TrimPrefix(s, "0x")
	var sb strings.Builder
	for _, c := range h {
		v, err := strconv.ParseUint(string(c), 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad hex %q", s)
		}
		fmt.Fprintf(&sb, "%04b", v)
	}
	return sb.String(), nil
}

func params(s string) ([]Param, error) {
	var out []Param
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		name, val, ok := strings.Cut(p, ":")
		if !ok {
			return nil, fmt.Errorf("cannot read parameter %q", p)
		}
		hx := strings.TrimPrefix(strings.ToLower(val), "0x")
		// big.Int takes a sign; a table entry's value is unsigned (a
		// negative one would be written as its absolute value).
		v, ok := new(big.Int).SetString(hx, 16)
		if !ok || strings.HasPrefix(hx, "-") || strings.HasPrefix(hx, "+") {
			return nil, fmt.Errorf("cannot read parameter value %q", p)
		}
		out = append(out, Param{Name: name, Value: v})
	}
	return out, nil
}

// Param returns the entry's parameter name (0 when absent).
func (e *Entry) Param(name string) *big.Int {
	for _, p := range e.Params {
		if p.Name == name {
			return p.Value
		}
	}
	return new(big.Int)
}

// Uint is a parameter as an unsigned number.
func (e *Entry) Uint(name string) uint64 { return e.Param(name).Uint64() }

// Bytes is a parameter as n big-endian bytes.
func (e *Entry) Bytes(name string, n int) []byte { return e.Param(name).FillBytes(make([]byte, n)) }

// Key returns the entry's key field name.
func (e *Entry) Key(name string) (Key, bool) {
	for _, k := range e.Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// Value is the key's bits with '*' taken as 0, as big-endian bytes of
// its width rounded up to bytes (the value sits in the low bits).
func (k Key) Value() []byte {
	v, _ := new(big.Int).SetString(strings.ReplaceAll(k.Bits, "*", "0"), 2)
	if v == nil {
		v = new(big.Int)
	}
	return v.FillBytes(make([]byte, (len(k.Bits)+7)/8))
}

// Uint is the key's value (wildcards as 0).
func (k Key) Uint() uint64 {
	v, _ := new(big.Int).SetString(strings.ReplaceAll(k.Bits, "*", "0"), 2)
	if v == nil {
		return 0
	}
	return v.Uint64()
}

// Width is the key's width in bits.
func (k Key) Width() int { return len(k.Bits) }

// PrefixLen is how many leading bits are given: an LPM key's prefix
// length, the whole width for an exact key. ok is false when a given bit
// follows a wildcard (a ternary mask that is no prefix).
func (k Key) PrefixLen() (n int, ok bool) {
	n = strings.IndexByte(k.Bits, '*')
	if n < 0 {
		return len(k.Bits), true
	}
	return n, strings.Trim(k.Bits[n:], "*") == ""
}

// Prefix reads an LPM key of 32 or 128 bits as an IPv4 or IPv6 prefix.
func (k Key) Prefix() (netip.Prefix, error) {
	n, ok := k.PrefixLen()
	if !ok {
		return netip.Prefix{}, fmt.Errorf("key %s %s is no prefix", k.Name, k.Bits)
	}
	v := k.Value()
	switch k.Width() {
	case 32:
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(v)), n), nil
	case 128:
		return netip.PrefixFrom(netip.AddrFrom16([16]byte(v)), n), nil
	}
	return netip.Prefix{}, fmt.Errorf("key %s: %d bits, not an address", k.Name, k.Width())
}

// Mask is a ternary key's mask: 1 for every bit that is not '*'.
func (k Key) Mask() []byte {
	var sb strings.Builder
	for _, c := range k.Bits {
		if c == '*' {
			sb.WriteByte('0')
		} else {
			sb.WriteByte('1')
		}
	}
	v, _ := new(big.Int).SetString(sb.String(), 2)
	if v == nil {
		v = new(big.Int)
	}
	return v.FillBytes(make([]byte, (len(k.Bits)+7)/8))
}

// Match checks a frame that left on port against the expectation.
func (e *Expected) Match(port int, frame []byte) error {
	if port != e.Port {
		return fmt.Errorf("left on port %d, want %d", port, e.Port)
	}
	if e.Odd {
		return fmt.Errorf("P4Testgen expects %d bytes and a nibble, which no frame is:\n got  %x\n want %s?", len(e.Data), frame, e)
	}
	if e.Exact && len(frame) != len(e.Data) || len(frame) < len(e.Data) {
		return fmt.Errorf("%d bytes, want %d:\n got  %x\n want %s", len(frame), len(e.Data), frame, e)
	}
	var diffs []string
	for i := range e.Data {
		if (frame[i]^e.Data[i])&e.Care[i] != 0 {
			if len(diffs) == 10 {
				diffs = append(diffs, "...")
				break
			}
			diffs = append(diffs, strconv.Itoa(i))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("bytes differ at offsets %s\n got  %x\n want %s", strings.Join(diffs, ","), frame, e)
}

// String is the expected frame as hex, '*' for a nibble that does not
// matter, '?' for one that matters in part.
func (e *Expected) String() string {
	var b strings.Builder
	for i := range 2 * len(e.Data) {
		shift := uint(4 * (1 - i%2))
		d, c := e.Data[i/2]>>shift&0xf, e.Care[i/2]>>shift&0xf
		switch c {
		case 0:
			b.WriteByte('*')
		case 0xf:
			b.WriteByte("0123456789abcdef"[d])
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// Chose reports whether the trace shows table taking action (a table
// entry P4Testgen installed, or the default it overrode), for adapters
// that need to know which of several entries a path used.
func (tc *Test) Chose(table, action string) bool {
	for _, l := range tc.Trace {
		if strings.HasPrefix(l, "[Table Branch: "+table) && strings.Contains(l, action) {
			return true
		}
	}
	return false
}
