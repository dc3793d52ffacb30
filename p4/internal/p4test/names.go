package p4test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	objRE   = regexp.MustCompile(`bfrt\.(\w+)\.pipe\.(\w+)\.(\w+)`)
	fieldRE = regexp.MustCompile(`b'(\w+)\.(\w+)\.f1'`)
)

// CheckScript checks every table, register, counter and meter the script s
// (named file in messages) names against ps: that it is declared, and
// that each call on it takes the keys and action parameters the source
// declares, by keyword. prog, when not empty, is the bfrt program name
// every object must be under. Each object named is marked in used, for
// CheckCovered.
func CheckScript(t testing.TB, ps *Source, prog, file, s string, used map[string]bool) {
	t.Helper()
	for ln, line := range strings.Split(s, "\n") {
		where := fmt.Sprintf("%s:%d", file, ln+1)
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range fieldRE.FindAllStringSubmatch(line, -1) {
			if _, ok := ps.Registers[m[1]+"."+m[2]]; !ok {
				t.Errorf("%s: register data field of %s.%s, which %s does not declare", where, m[1], m[2], ps.File)
			}
		}
		for _, loc := range objRE.FindAllStringSubmatchIndex(line, -1) {
			if got := line[loc[2]:loc[3]]; prog != "" && got != prog {
				t.Errorf("%s: program %q, want %q", where, got, prog)
			}
			obj := line[loc[4]:loc[5]] + "." + line[loc[6]:loc[7]]
			used[obj] = true
			tab, isTable := ps.Tables[obj]
			_, isReg := ps.Registers[obj]
			_, isCnt := ps.Counters[obj]
			meter, isMeter := ps.Meters[obj]
			if !isTable && !isReg && !isCnt && !isMeter {
				t.Errorf("%s: %s is no table, register, counter or meter of %s", where, obj, ps.File)
				continue
			}
			rest := line[loc[1]:]
			if !strings.HasPrefix(rest, ".") {
				continue // passed as an object, e.g. to counter()
			}
			method, args, ok := call(rest[1:])
			if !ok {
				t.Errorf("%s: cannot read the call on %s", where, obj)
				continue
			}
			kw, err := kwargs(args)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			slices.Sort(kw)
			var want []string
			switch {
			case method == "clear":
			case strings.HasPrefix(method, "add_with_") && isTable:
				action := strings.TrimPrefix(method, "add_with_")
				if !slices.Contains(tab.Actions, action) {
					t.Errorf("%s: %s has no action %s (actions %v)", where, obj, action, tab.Actions)
				}
				ternary := false
				for _, k := range tab.Keys {
					want = append(want, k.Name)
					switch k.Kind {
					case "lpm":
						want = append(want, k.Name+"_p_length")
					case "ternary":
						want = append(want, k.Name+"_mask")
						ternary = true
					}
				}
				if ternary {
					want = append(want, "MATCH_PRIORITY")
				}
				want = append(want, actionParams(t, ps, where, obj, action)...)
			case strings.HasPrefix(method, "set_default_with_") && isTable:
				action := strings.TrimPrefix(method, "set_default_with_")
				if !slices.Contains(tab.Actions, action) {
					t.Errorf("%s: %s has no action %s (actions %v)", where, obj, action, tab.Actions)
				}
				if len(tab.Keys) > 0 {
					t.Errorf("%s: %s is set through its default action but has keys", where, obj)
				}
				want = actionParams(t, ps, where, obj, action)
			case method == "mod" && isReg:
				want = []string{"REGISTER_INDEX", "f1"}
			case method == "get" && isReg:
				want = []string{"REGISTER_INDEX", "from_hw", "print_ents"}
			case method == "mod" && isMeter:
				want = append([]string{"METER_INDEX"}, meter.Fields...)
			default:
				t.Errorf("%s: %s.%s: not a call the tests know", where, obj, method)
				continue
			}
			slices.Sort(want)
			if method != "clear" && !slices.Equal(kw, want) {
				t.Errorf("%s: %s.%s takes %v, want %v", where, obj, method, kw, want)
			}
		}
	}
}

func actionParams(t testing.TB, ps *Source, where, obj, action string) []string {
	ctl, _, _ := strings.Cut(obj, ".")
	if action == "NoAction" {
		return nil
	}
	params, ok := ps.Actions[ctl+"."+action]
	if !ok {
		t.Errorf("%s: action %s.%s is not declared in %s", where, ctl, action, ps.File)
	}
	return params
}

// CheckCovered fails for every table without const entries (or without
// keys and with a const default action), register and counter of ps that
// no script checked by CheckScript named: a script that neither fills nor
// clears one leaves a previous test's state behind.
func CheckCovered(t testing.TB, ps *Source, used map[string]bool) {
	t.Helper()
	for name := range ps.Tables {
		if len(ps.Entries[name]) == 0 && !ps.Tables[name].Fixed && !used[name] {
			t.Errorf("%s: table %s has no const entries and no script fills it", ps.File, name)
		}
	}
	for name := range ps.Registers {
		if !used[name] {
			t.Errorf("%s: register %s is named by no script", ps.File, name)
		}
	}
	for name := range ps.Counters {
		if !used[name] {
			t.Errorf("%s: counter %s is named by no script", ps.File, name)
		}
	}
	for name := range ps.Meters {
		if !used[name] {
			t.Errorf("%s: meter %s is named by no script", ps.File, name)
		}
	}
}

// call splits "method(args)..." at the parenthesis matching the first.
func call(s string) (method, args string, ok bool) {
	i := strings.IndexByte(s, '(')
	if i < 0 {
		return "", "", false
	}
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[:i], s[i+1 : j], true
			}
		}
	}
	return "", "", false
}

// kwargs returns the keyword names of a Python call's argument list; a
// positional argument is an error, since bfrt_python takes keys and
// action parameters by name only.
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
