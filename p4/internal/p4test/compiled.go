package p4test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/p4/internal/p4build"
)

// Compiled compiles the P4 program prog (a path from the test's package
// directory) with flags for Tofino 1 through bf-p4c, or takes the verdict
// make p4check cached for the same program, flags and compiler, and
// returns what the compiled program's bfrt.json declares as a Source:
// the names a control plane can use on the switch. Checking a script
// against it with CheckScript catches what the source reader cannot (a
// name the compiler changes or drops). Without ../shared the test is
// skipped, saying so; a first compile takes up to a minute.
func Compiled(t *testing.T, prog string, flags ...string) *Source {
	t.Helper()
	root, err := p4build.Root()
	if err != nil {
		t.Fatal(err)
	}
	tools, err := p4build.FindTools(root)
	if errors.Is(err, p4build.ErrNoTools) {
		t.Skipf("bf-p4c not available, the names are checked against the P4 source only: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := tools.Compile(p4build.Build{Prog: prog, Flags: flags, Target: 1})
	if errors.Is(err, p4build.ErrNoTools) {
		t.Skipf("bf-p4c cannot run here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !r.Fits {
		t.Fatalf("%s %v does not compile or fit with bf-p4c: %s\n%s", prog, flags, r.Summary, r.Errors)
	}
	ps, err := FromBfrt(filepath.Join(r.Dir, "bfrt.json"))
	if err != nil {
		t.Fatal(err)
	}
	ps.File = prog + " (bfrt.json)"
	return ps
}

type bfrtJSON struct {
	Tables []struct {
		Name      string `json:"name"`
		TableType string `json:"table_type"`
		Size      uint64 `json:"size"`
		Key       []struct {
			Name      string `json:"name"`
			MatchType string `json:"match_type"`
		} `json:"key"`
		ActionSpecs []struct {
			Name string `json:"name"`
			Data []struct {
				Name string `json:"name"`
			} `json:"data"`
		} `json:"action_specs"`
		Data []struct {
			Singleton struct {
				Name string `json:"name"`
			} `json:"singleton"`
		} `json:"data"`
	} `json:"tables"`
}

// FromBfrt reads a compiled program's bfrt.json into a Source: its match
// tables (keys and their match kinds, actions and their parameters),
// registers (those with an f1 data field, which the scripts write) and
// counters, named "Ingress.x" as in the P4 source. Const entries and
// constants are not in bfrt.json.
func FromBfrt(path string) (*Source, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var bj bfrtJSON
	if err := json.Unmarshal(b, &bj); err != nil {
		return nil, err
	}
	ps := &Source{File: path, Consts: map[string]uint64{}, Tables: map[string]*Table{}, Actions: map[string][]string{},
		Registers: map[string]uint64{}, Counters: map[string]uint64{}, Meters: map[string]Meter{}, Entries: map[string][]Entry{},
		Polys: map[string]CRCPoly{}}
	for _, tb := range bj.Tables {
		name, ok := strings.CutPrefix(tb.Name, "pipe.")
		if !ok {
			continue // pre, mirror, port, snapshot and debug tables
		}
		switch tb.TableType {
		case "MatchAction_Direct":
			tab := &Table{Size: tb.Size}
			for _, k := range tb.Key {
				if strings.HasPrefix(k.Name, "$") {
					continue // $MATCH_PRIORITY: bfrt_python's MATCH_PRIORITY, which CheckScript adds for ternary keys
				}
				tab.Keys = append(tab.Keys, Key{Name: k.Name, Kind: strings.ToLower(k.MatchType)})
			}
			ctl, _, _ := strings.Cut(name, ".")
			for _, a := range tb.ActionSpecs {
				short := a.Name[strings.LastIndexByte(a.Name, '.')+1:]
				tab.Actions = append(tab.Actions, short)
				if short == "NoAction" {
					continue
				}
				var params []string
				for _, d := range a.Data {
					params = append(params, d.Name)
				}
				ps.Actions[ctl+"."+short] = params
			}
			ps.Tables[name] = tab
		case "Register":
			for _, d := range tb.Data {
				if d.Singleton.Name == name+".f1" {
					ps.Registers[name] = tb.Size
				}
			}
		case "Counter":
			ps.Counters[name] = tb.Size
		case "Meter":
			m := Meter{Size: tb.Size}
			for _, d := range tb.Data {
				m.Fields = append(m.Fields, strings.TrimPrefix(d.Singleton.Name, "$"))
			}
			ps.Meters[name] = m
		}
	}
	if len(ps.Tables) == 0 {
		return nil, errors.New(path + ": no match tables: not a bfrt.json of a TNA program")
	}
	return ps, nil
}
