package hostmesh

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// TestParsePGDrops reads SONiC's PG drop table: every port's count of
// every group, N/A left out; malformed rows are counted and dropped, and
// a table without its header is an error.
func TestParsePGDrops(t *testing.T) {
	b, err := os.ReadFile("testdata/show-pg-drop-sonic.txt")
	if err != nil {
		t.Fatal(err)
	}
	c, bad, err := ParsePGDrops(bytes.NewReader(b))
	if err != nil || bad != 0 || len(c) != 24 {
		t.Fatalf("%d counts, %d malformed, %v", len(c), bad, err)
	}
	if !slices.Contains(c, PGCount{Port: "Ethernet4", PG: 3, Drops: 1529}) || !slices.Contains(c, PGCount{Port: "Ethernet4", PG: 0, Drops: 12}) ||
		slices.ContainsFunc(c, func(x PGCount) bool { return x.Port == "Ethernet12" }) {
		t.Fatalf("counts %+v", c)
	}
	broken := strings.Replace(string(b), "Ethernet8      0      0      0     17", "Ethernet8      0      0      0     x7", 1) + "Ethernet16 1 2\n"
	c, bad, err = ParsePGDrops(strings.NewReader(broken))
	if err != nil || bad != 2 || len(c) != 16 {
		t.Fatalf("broken rows: %d counts, %d malformed, %v", len(c), bad, err)
	}
	for _, in := range []string{"", "Ingress PG dropped packets:\n", "Port PG0 Queue1\nEthernet0 1 2\n", "Port PG99\n"} {
		if _, _, err := ParsePGDrops(strings.NewReader(in)); err == nil {
			t.Fatalf("%q: want an error", in)
		}
	}
}

// TestPGPoller: the first reading is a baseline; then each port's change
// of the poller's group over the interval, a cleared counter counting
// from zero; a switch that cannot be read is skipped and named.
func TestPGPoller(t *testing.T) {
	tables := []string{
		"Port PG0 PG3\nEthernet0 5 100\nEthernet4 0 7\n",
		"Port PG0 PG3\nEthernet0 9 160\nEthernet4 0 7\n",
		"Port PG0 PG3\nEthernet0 9 4\nEthernet4 0 9\n",
	}
	k := 0
	p := PGPoller{PG: 3, Switches: []PGSwitch{
		{Name: "rail0", Read: func(context.Context) ([]byte, error) { return []byte(tables[k]), nil }},
		{Name: "rail1", Read: func(context.Context) ([]byte, error) { return nil, errors.New("ssh: connection refused") }},
	}}
	var got [][]hostmeshanalyzer.PGDrop
	for k = range tables {
		recs, err := p.Poll(context.Background(), int64(k+1)*1000)
		if err == nil || !strings.Contains(err.Error(), "rail1") {
			t.Fatalf("poll %d: error %v, want rail1's", k, err)
		}
		got = append(got, recs)
	}
	want := [][]hostmeshanalyzer.PGDrop{nil,
		{{Switch: "rail0", Port: "Ethernet0", PG: 3, From: 1000, To: 2000, Discards: 60}},
		{{Switch: "rail0", Port: "Ethernet0", PG: 3, From: 2000, To: 3000, Discards: 4}, {Switch: "rail0", Port: "Ethernet4", PG: 3, From: 2000, To: 3000, Discards: 2}},
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("poll %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if p.Failures != 3 {
		t.Fatalf("failures %d, want 3", p.Failures)
	}
}

// TestRunPGPoller runs the poller on a command's output into a file of
// batches, which the analyzer reads back as records of the switch.
func TestRunPGPoller(t *testing.T) {
	// The command prints a table whose count grows by 5 a reading.
	state := t.TempDir() + "/n"
	cmd := CommandPG(`n=$(cat ` + state + ` 2>/dev/null || echo 0); printf 'Port PG3\nEthernet0 %d\n' "$n"; echo $((n + 5)) > ` + state)
	n := int64(0)
	var out bytes.Buffer
	up := NewUploader("", 0)
	up.File = &out
	err := RunPGPoller(context.Background(), PGPollOptions{Poller: PGPoller{PG: 3, Switches: []PGSwitch{{Name: "rail0", Read: cmd}}},
		Name: "poller", Every: 10 * time.Millisecond, Duration: 2 * time.Second, Up: up, Log: slog.New(slog.DiscardHandler),
		Now: func() int64 { n += 1000; return n }})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := hostmeshanalyzer.ReadBatches(&out)
	if err != nil || len(bs) < 2 {
		t.Fatalf("%d batches, %v", len(bs), err)
	}
	for _, b := range bs {
		if b.Host != "poller" || len(b.PGDrops) != 1 || b.PGDrops[0].Discards != 5 || b.PGDrops[0].Switch != "rail0" || b.PGDrops[0].Valid() != nil {
			t.Fatalf("batch %+v", b)
		}
	}
}
