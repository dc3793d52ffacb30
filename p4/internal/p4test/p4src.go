// Package p4test holds the test helpers of the Tofino control planes under
// p4/ (p4/luminatofino, p4/dtatofino): a reader of their P4 sources and a check that
// every table, action, key, parameter, register and counter a generated
// bfrt_python script names is declared there; a mock bfrt_python to run
// the scripts against; p4c's front end on the sources; golden-file
// comparison. It is imported by _test.go files only.
package p4test

import (
	"fmt"
	"math/bits"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Source is what the tests need to know of a TNA program, read with
// regular expressions and brace matching: the programs are ours and
// written plainly, and p4c checks the rest. Names inside a control are
// qualified by it, as bfrt qualifies them: "Ingress.event_psn".
type Source struct {
	File      string
	Consts    map[string]uint64   // const bit<N> declarations
	Tables    map[string]*Table   // "Ingress.event_psn"
	Actions   map[string][]string // "Ingress.drop" -> parameter names
	Registers map[string]uint64   // "Ingress.conn_psn" -> size
	Counters  map[string]uint64   // "Ingress.rx_pkts" -> size
	// Meters are indexed meters by name, with the data fields a meter
	// entry takes in bfrt_python (the rates and bursts of its type).
	Meters  map[string]Meter
	Entries map[string][]Entry // const entries per table
	Polys   map[string]CRCPoly // CRCPolynomial instances by name
}

// Table is a table's declaration.
type Table struct {
	Keys    []Key
	Actions []string
	Size    uint64
	// Fixed is a keyless table with a const default action: a step of
	// the program that Tofino's rules made a table, nothing for the
	// control plane to fill.
	Fixed bool
}

// Meter is an indexed meter: its size and the data fields of an entry
// (bfrt's names without the '$': METER_SPEC_CIR_PPS, ...).
type Meter struct {
	Size   uint64
	Fields []string
}

// meterFields are the data fields of a TNA meter of each type: a
// two-rate three-colour meter's committed and peak rates and bursts.
var meterFields = map[string][]string{
	"PACKETS": {"METER_SPEC_CIR_PPS", "METER_SPEC_PIR_PPS", "METER_SPEC_CBS_PKTS", "METER_SPEC_PBS_PKTS"},
	"BYTES":   {"METER_SPEC_CIR_KBPS", "METER_SPEC_PIR_KBPS", "METER_SPEC_CBS_KBITS", "METER_SPEC_PBS_KBITS"},
}

// Key is a key element: its bfrt name (the @name annotation, else the
// last component of the field) and match kind.
type Key struct{ Name, Kind string }

// Entry is a const entry with a single key.
type Entry struct {
	Key    uint64
	Action string
}

// CRCPoly is a TNA CRCPolynomial's arguments.
type CRCPoly struct {
	Coeff                   uint32
	Reversed, MSB, Extended bool
	Init, Xor               uint32
}

// Sum is the CRC the polynomial describes over data, bytes in order, as
// Tofino's hash computes it (without the MSB and extended forms, which
// Sum ignores: check them apart).
func (p CRCPoly) Sum(data []byte) uint32 {
	c := p.Init
	for _, b := range data {
		if p.Reversed {
			b = bits.Reverse8(b)
		}
		c ^= uint32(b) << 24
		for range 8 {
			if c&0x8000_0000 != 0 {
				c = c<<1 ^ p.Coeff
			} else {
				c <<= 1
			}
		}
	}
	if p.Reversed {
		c = bits.Reverse32(c)
	}
	return c ^ p.Xor
}

var (
	commentRE   = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	constRE     = regexp.MustCompile(`const\s+bit<\d+>\s+(\w+)\s*=\s*(\w+)\s*;`)
	controlRE   = regexp.MustCompile(`\bcontrol\s+(\w+)\s*\(`)
	actionRE    = regexp.MustCompile(`\baction\s+(\w+)\s*\(([^)]*)\)`)
	tableRE     = regexp.MustCompile(`\btable\s+(\w+)\s*\{`)
	keyBlockRE  = regexp.MustCompile(`\bkey\s*=\s*\{([^}]*)\}`)
	keyElemRE   = regexp.MustCompile(`^\s*([\w.\[\]:]+)\s*:\s*(\w+)\s*(?:@name\("(\w+)"\))?\s*$`)
	actsBlockRE = regexp.MustCompile(`\bactions\s*=\s*\{([^}]*)\}`)
	sizeRE      = regexp.MustCompile(`\bsize\s*=\s*(\w+)\s*;`)
	registerRE  = regexp.MustCompile(`\bRegister<[^;]*?>\s*\(\s*(\w+)[^)]*\)\s+(\w+)\s*;`)
	counterRE   = regexp.MustCompile(`\bCounter<[^;]*?>\s*\(\s*(\w+)\s*,[^)]*\)\s+(\w+)\s*;`)
	meterRE     = regexp.MustCompile(`\bMeter<[^;]*?>\s*\(\s*(\w+)\s*,\s*MeterType_t\.(\w+)[^)]*\)\s+(\w+)\s*;`)
	entryRE     = regexp.MustCompile(`(0x[0-9a-fA-F]+|\d+)\s*:\s*(\w+)\s*\([^)]*\)\s*;`)
	crcPolyRE   = regexp.MustCompile(`CRCPolynomial<bit<32>>\(\s*32w(0x[0-9a-fA-F]+)\s*,\s*(true|false)\s*,\s*(true|false)\s*,\s*(true|false)\s*,\s*32w(0x[0-9a-fA-F]+)\s*,\s*32w(0x[0-9a-fA-F]+)\s*\)\s*(\w+)\s*;`)
)

// block returns the text between the brace at src[open] and its match.
func block(src string, open int) (string, error) {
	depth := 0
	for i := open; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return src[open+1 : i], nil
			}
		}
	}
	return "", fmt.Errorf("unbalanced braces from offset %d", open)
}

// Parse reads the P4 source at path. It fails the test if the source
// yields no tables, actions or registers, which would make every check on
// them pass vacuously.
func Parse(t testing.TB, path string) *Source {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := commentRE.ReplaceAllString(string(raw), "")
	ps := &Source{File: path, Consts: map[string]uint64{}, Tables: map[string]*Table{}, Actions: map[string][]string{},
		Registers: map[string]uint64{}, Counters: map[string]uint64{}, Meters: map[string]Meter{}, Entries: map[string][]Entry{},
		Polys: map[string]CRCPoly{}}
	num := func(s string) uint64 {
		if v, ok := ps.Consts[s]; ok {
			return v
		}
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("%s: %q is neither a number nor a constant", path, s)
		}
		return v
	}
	for _, m := range constRE.FindAllStringSubmatch(src, -1) {
		ps.Consts[m[1]] = num(m[2])
	}
	for _, m := range crcPolyRE.FindAllStringSubmatch(src, -1) {
		ps.Polys[m[7]] = CRCPoly{Coeff: uint32(num(m[1])), Reversed: m[2] == "true", MSB: m[3] == "true",
			Extended: m[4] == "true", Init: uint32(num(m[5])), Xor: uint32(num(m[6]))}
	}
	for _, cm := range controlRE.FindAllStringSubmatchIndex(src, -1) {
		ctl := src[cm[2]:cm[3]]
		// The body is the first brace after the parameter list's ')'.
		depth, i := 0, cm[1]-1
		for ; i < len(src); i++ {
			if src[i] == '(' {
				depth++
			} else if src[i] == ')' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		open := strings.IndexByte(src[i:], '{') + i
		body, err := block(src, open)
		if err != nil {
			t.Fatalf("%s: control %s: %v", path, ctl, err)
		}
		for _, m := range actionRE.FindAllStringSubmatch(body, -1) {
			var params []string
			for _, p := range strings.Split(m[2], ",") {
				if f := strings.Fields(p); len(f) > 0 {
					params = append(params, f[len(f)-1])
				}
			}
			ps.Actions[ctl+"."+m[1]] = params
		}
		for _, m := range registerRE.FindAllStringSubmatch(body, -1) {
			ps.Registers[ctl+"."+m[2]] = num(m[1])
		}
		for _, m := range counterRE.FindAllStringSubmatch(body, -1) {
			ps.Counters[ctl+"."+m[2]] = num(m[1])
		}
		for _, m := range meterRE.FindAllStringSubmatch(body, -1) {
			f, ok := meterFields[m[2]]
			if !ok {
				t.Fatalf("%s: meter %s of type %s", path, m[3], m[2])
			}
			ps.Meters[ctl+"."+m[3]] = Meter{Size: num(m[1]), Fields: f}
		}
		for _, tm := range tableRE.FindAllStringSubmatchIndex(body, -1) {
			name := body[tm[2]:tm[3]]
			tb, err := block(body, tm[1]-1)
			if err != nil {
				t.Fatalf("%s: table %s: %v", path, name, err)
			}
			tab := &Table{}
			if m := keyBlockRE.FindStringSubmatch(tb); m != nil {
				for _, el := range strings.Split(m[1], ";") {
					if strings.TrimSpace(el) == "" {
						continue
					}
					km := keyElemRE.FindStringSubmatch(el)
					if km == nil {
						t.Fatalf("%s: table %s: cannot read key element %q", path, name, el)
					}
					kn := km[3]
					if kn == "" {
						kn = km[1][strings.LastIndexByte(km[1], '.')+1:]
					}
					tab.Keys = append(tab.Keys, Key{Name: kn, Kind: km[2]})
				}
			}
			if m := actsBlockRE.FindStringSubmatch(tb); m != nil {
				for _, a := range strings.Split(m[1], ";") {
					f := strings.Fields(a)
					if len(f) > 0 {
						tab.Actions = append(tab.Actions, f[len(f)-1])
					}
				}
			}
			if m := sizeRE.FindStringSubmatch(tb); m != nil {
				tab.Size = num(m[1])
			}
			tab.Fixed = len(tab.Keys) == 0 && strings.Contains(tb, "const default_action")
			if i := strings.Index(tb, "const entries"); i >= 0 {
				eb, err := block(tb, strings.IndexByte(tb[i:], '{')+i)
				if err != nil {
					t.Fatalf("%s: table %s entries: %v", path, name, err)
				}
				for _, m := range entryRE.FindAllStringSubmatch(eb, -1) {
					ps.Entries[ctl+"."+name] = append(ps.Entries[ctl+"."+name], Entry{Key: num(m[1]), Action: m[2]})
				}
			}
			ps.Tables[ctl+"."+name] = tab
		}
	}
	if len(ps.Tables) == 0 || len(ps.Actions) == 0 || len(ps.Registers) == 0 {
		t.Fatalf("%s: found %d tables, %d actions, %d registers: the reader is broken", path,
			len(ps.Tables), len(ps.Actions), len(ps.Registers))
	}
	return ps
}
