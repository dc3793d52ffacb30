package ns3

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
)

func needNS3(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("ns-3 not usable here, skipping: %v", err)
	}
}

// TestRunTiny builds the scenario (cached after the first time) and runs a
// k=4 fat-tree for 1 ms with a few flows that all finish, checking that the
// report parses and adds up.
func TestRunTiny(t *testing.T) {
	needNS3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := Build(ctx, "scenario") // the source as committed
	if err != nil {
		t.Fatal(err)
	}
	flows := workload.Merge(
		workload.Incast([]int{1, 2, 3, 4, 8, 12}, 0, 20_000, 2, 100_000, 0), // same tor, pod, other pods
		[]workload.Flow{{Src: 15, Dst: 5, Size: 100_000, Start: 10_000}},
	)
	var want int64
	for _, f := range flows {
		want += f.Size
	}
	csv := filepath.Join(t.TempDir(), "flows.csv")
	fh, err := os.Create(csv)
	if err != nil {
		t.Fatal(err)
	}
	if err := workload.WriteCSV(fh, flows); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	r, err := Run(ctx, bin, 4, "100G", "1us", csv, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v (%.3g hops/s)", r, r.HopsPerSec())
	if r.SimNs != 1e6 || r.Flows != len(flows) || r.RxBytes != want || r.Packets == 0 || r.Hops <= r.Packets || r.Wall <= 0 {
		t.Fatalf("report %+v, want 1 ms simulated, %d flows, %d bytes received", r, len(flows), want)
	}
	// Every data packet crosses 2, 4 or 6 links and ACKs come back the
	// same way, so hops are between 2 and 6 times what hosts receive.
	if r.Hops < 2*r.Packets || r.Hops > 6*r.Packets {
		t.Errorf("%d hops for %d packets received", r.Hops, r.Packets)
	}

	// The embedded copy is the committed file.
	src, err := os.ReadFile("scenario/fattree.cc")
	if err != nil || string(src) != string(fattreeSource) {
		t.Error("embedded fattree.cc differs from the file")
	}
	// A flow file that does not fit the tree is refused with the line.
	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("src,dst,size,start_ns\n0,16,10,0\n"), 0o644)
	if _, err := Run(ctx, bin, 4, "100G", "1us", bad, time.Millisecond); err == nil || !strings.Contains(err.Error(), "bad.csv:2") {
		t.Errorf("a host beyond the tree: %v", err)
	}
}

func TestRunArguments(t *testing.T) {
	ctx := context.Background()
	csv := filepath.Join(t.TempDir(), "f.csv")
	os.WriteFile(csv, []byte("src,dst,size,start_ns\n"), 0o644)
	for _, c := range []struct {
		k         int
		bw, delay string
		csv       string
		d         time.Duration
		want      string
	}{
		{3, "100G", "1us", csv, time.Millisecond, "k=3"},
		{4, "fast", "1us", csv, time.Millisecond, `bandwidth "fast"`},
		{4, "100G", "soon", csv, time.Millisecond, `delay "soon"`},
		{4, "100G", "1us", csv, 0, "duration 0s"},
		{4, "100G", "1us", csv + ".missing", time.Millisecond, "flows:"},
	} {
		_, err := Run(ctx, "/nonexistent", c.k, c.bw, c.delay, c.csv, c.d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(k=%d, %q, %q, %v) = %v, want %q", c.k, c.bw, c.delay, c.d, err, c.want)
		}
	}
}

func TestParseReport(t *testing.T) {
	r, err := parseReport("noise\nns3 k=4 hosts=16 flows=3 sim_ns=1000000 rx_packets=1330 hops=7980 rx_bytes=1250000 setup_ns=38 wall_ns=2000000\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Result{SimNs: 1e6, Packets: 1330, Hops: 7980, Wall: 2 * time.Millisecond, Setup: 38, Flows: 3, RxBytes: 1250000}
	if r != want {
		t.Fatalf("%+v, want %+v", r, want)
	}
	if got := r.HopsPerSec(); got != 7980/0.002 {
		t.Errorf("HopsPerSec %v", got)
	}
	for _, bad := range []string{"", "ns3 sim_ns=1", "ns3 sim_ns=x rx_packets=1 hops=1 wall_ns=1", "ns3 junk"} {
		if _, err := parseReport(bad); err == nil {
			t.Errorf("parseReport(%q) accepted", bad)
		}
	}
}
