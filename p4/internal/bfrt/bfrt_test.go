package bfrt

import (
	"errors"
	"strings"
	"testing"
)

var errTest = errors.New("test: bad")

type testRecord struct {
	Head
	Name string `json:"name"`
}

func read(out string) ([]string, error) {
	var names []string
	err := ReadRecords(strings.NewReader(out), "x-counter ", errTest, func(ln int, rec *testRecord) error {
		names = append(names, rec.Name)
		return nil
	})
	return names, err
}

// TestReadRecords: records are found anywhere in a line, and output that
// is cut short, miscounted, unknown or continued after the end is refused
// rather than read as zeros.
func TestReadRecords(t *testing.T) {
	names, err := read("bfrt> x-counter {\"kind\": \"counter\", \"name\": \"a\"}\nnoise\nx-counter {\"kind\": \"end\", \"records\": 1}\n")
	if err != nil || len(names) != 1 || names[0] != "a" {
		t.Fatalf("%v %v", names, err)
	}
	for _, out := range []string{
		"",
		"x-counter {\"kind\": \"counter\", \"name\": \"a\"}\n",
		"x-counter {\"kind\": \"end\", \"records\": 2}\n",
		"x-counter {\"kind\": \"end\", \"records\": 0, \"extra\": 1}\n",
		"x-counter {\"kind\": \"end\", \"records\": 0}\nx-counter {\"kind\": \"end\", \"records\": 0}\n",
		// Two records run into one line: the second is not dropped unseen.
		"x-counter {\"kind\": \"counter\", \"name\": \"a\"} {\"kind\": \"counter\", \"name\": \"b\"}\nx-counter {\"kind\": \"end\", \"records\": 1}\n",
	} {
		if _, err := read(out); !errors.Is(err, errTest) {
			t.Errorf("%q: %v", out, err)
		}
	}
}

func TestCheckPorts(t *testing.T) {
	ok := Port{Name: "a-1", DevPort: 128, Speed: "100g", FEC: "RS"}
	if err := CheckPorts(errTest, []Port{ok, {Name: "b", FrontPanel: "65/7", Speed: "10G", FEC: "none", AutoNeg: "off"}}, nil); err != nil {
		t.Fatal(err)
	}
	for want, ports := range map[string][]Port{
		"ports:":               nil,
		"ports[1].name:":       {ok, {Name: "a_1"}},
		"ports[0].dev_port:":   {{Name: "a", DevPort: 72}},
		"ports[0].front_panel": {{Name: "a", FrontPanel: "0/0"}},
		"ports[0].speed:":      {{Name: "a", Speed: "400G"}},
	} {
		if err := CheckPorts(errTest, ports, nil); !errors.Is(err, errTest) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	more := func(i int, f string) error { return Bad(errTest, f+".more", "refused") }
	if err := CheckPorts(errTest, []Port{ok}, more); err == nil || !strings.Contains(err.Error(), "ports[0].more:") {
		t.Errorf("more: %v", err)
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 event entries", 1: "1 event entry", 2: "2 event entries"} {
		if got := Plural(n, "event entry"); got != want {
			t.Errorf("%d: %q", n, got)
		}
	}
}
