package dta

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// p4Source is what the tests need to know of the P4 source, read with
// regular expressions and brace matching (the program is ours and written
// plainly; p4c checks the rest).
type p4Source struct {
	consts    map[string]uint64
	tables    map[string]*p4Table  // "Ingress.event_psn"
	actions   map[string][]string  // "Ingress.drop" -> parameter names
	registers map[string]uint64    // "Ingress.conn_psn" -> size
	counters  map[string]uint64    // "Ingress.rx_pkts" -> size
	entries   map[string][]p4Entry // const entries per table
	polys     map[string]crcPoly   // CRCPolynomial instances by name
}

// crcPoly is a TNA CRCPolynomial's arguments.
type crcPoly struct {
	coeff                   uint32
	reversed, msb, extended bool
	init, xor               uint32
}

type p4Table struct {
	keys    []p4Key
	actions []string
	size    uint64
}

type p4Key struct{ name, kind string }

type p4Entry struct {
	key    uint64
	action string
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

func parseP4(t testing.TB, path string) *p4Source {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := commentRE.ReplaceAllString(string(raw), "")
	ps := &p4Source{consts: map[string]uint64{}, tables: map[string]*p4Table{}, actions: map[string][]string{},
		registers: map[string]uint64{}, counters: map[string]uint64{}, entries: map[string][]p4Entry{},
		polys: map[string]crcPoly{}}
	num := func(s string) uint64 {
		if v, ok := ps.consts[s]; ok {
			return v
		}
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("%s: %q is neither a number nor a constant", path, s)
		}
		return v
	}
	for _, m := range constRE.FindAllStringSubmatch(src, -1) {
		ps.consts[m[1]] = num(m[2])
	}
	for _, m := range crcPolyRE.FindAllStringSubmatch(src, -1) {
		ps.polys[m[7]] = crcPoly{coeff: uint32(num(m[1])), reversed: m[2] == "true", msb: m[3] == "true",
			extended: m[4] == "true", init: uint32(num(m[5])), xor: uint32(num(m[6]))}
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
			ps.actions[ctl+"."+m[1]] = params
		}
		for _, m := range registerRE.FindAllStringSubmatch(body, -1) {
			ps.registers[ctl+"."+m[2]] = num(m[1])
		}
		for _, m := range counterRE.FindAllStringSubmatch(body, -1) {
			ps.counters[ctl+"."+m[2]] = num(m[1])
		}
		for _, tm := range tableRE.FindAllStringSubmatchIndex(body, -1) {
			name := body[tm[2]:tm[3]]
			tb, err := block(body, tm[1]-1)
			if err != nil {
				t.Fatalf("%s: table %s: %v", path, name, err)
			}
			tab := &p4Table{}
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
					tab.keys = append(tab.keys, p4Key{name: kn, kind: km[2]})
				}
			}
			if m := actsBlockRE.FindStringSubmatch(tb); m != nil {
				for _, a := range strings.Split(m[1], ";") {
					f := strings.Fields(a)
					if len(f) > 0 {
						tab.actions = append(tab.actions, f[len(f)-1])
					}
				}
			}
			if m := sizeRE.FindStringSubmatch(tb); m != nil {
				tab.size = num(m[1])
			}
			if i := strings.Index(tb, "const entries"); i >= 0 {
				eb, err := block(tb, strings.IndexByte(tb[i:], '{')+i)
				if err != nil {
					t.Fatalf("%s: table %s entries: %v", path, name, err)
				}
				for _, m := range entryRE.FindAllStringSubmatch(eb, -1) {
					ps.entries[ctl+"."+name] = append(ps.entries[ctl+"."+name], p4Entry{key: num(m[1]), action: m[2]})
				}
			}
			ps.tables[ctl+"."+name] = tab
		}
	}
	if len(ps.tables) == 0 || len(ps.actions) == 0 || len(ps.registers) == 0 {
		t.Fatalf("%s: found %d tables, %d actions, %d registers: the reader is broken", path,
			len(ps.tables), len(ps.actions), len(ps.registers))
	}
	return ps
}

// kwargs returns the keyword names of a Python call's argument list.
func kwargs(args string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	var quote byte
	split := func(end int) error {
		a := strings.TrimSpace(args[start:end])
		if a == "" {
			return nil
		}
		k, _, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("positional argument %q", a)
		}
		out = append(out, strings.TrimSpace(k))
		return nil
	}
	for i := 0; i < len(args); i++ {
		c := args[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			if err := split(i); err != nil {
				return nil, err
			}
			start = i + 1
		}
	}
	return out, split(len(args))
}
