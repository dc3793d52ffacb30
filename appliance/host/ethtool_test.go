//go:build linux

package host

import (
	"bufio"
	"errors"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/netns"
)

// fakeStats is an EthtoolStats holding the names and values of an
// `ethtool -S` listing, without a socket.
func fakeStats(t *testing.T, listing string) (*EthtoolStats, []uint64) {
	t.Helper()
	e := &EthtoolStats{netdev: "fake0", index: map[string]int{}}
	var vals []uint64
	sc := bufio.NewScanner(strings.NewReader(listing))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.HasPrefix(k, "NIC statistics") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		e.index[strings.TrimSpace(k)] = len(e.names)
		e.names = append(e.names, strings.TrimSpace(k))
		vals = append(vals, n)
	}
	return e, vals
}

// TestPFCNames picks a priority's pause counters out of mlx5's statistics
// (durations in microseconds, as hostmesh reads the same listing) and out
// of the E810's ice names (no durations), and refuses a driver without
// them, naming the counter it looked for.
func TestPFCNames(t *testing.T) {
	b, err := os.ReadFile("testdata/ethtool-S-mlx5.txt")
	if err != nil {
		t.Fatal(err)
	}
	e, vals := fakeStats(t, string(b))
	p := &PFCStats{e: e, prio: 3}
	if err := p.lookup(); err != nil {
		t.Fatal(err)
	}
	want := PFCCounters{TxPause: 96204, RxPause: 148213, TxPauseNs: 1904772_000, RxPauseNs: 3320119_000, Durations: true}
	if c := pfcFrom(p.idx, vals); c != want {
		t.Fatalf("mlx5 prio 3: %+v, want %+v", c, want)
	}
	p.prio = 5
	if err := p.lookup(); err == nil || !strings.Contains(err.Error(), "rx_prio5_pause") {
		t.Fatalf("mlx5 prio 5 (no counters in the sample): %v", err)
	}

	ice, vals := fakeStats(t, "     rx_priority_3_xon.nic: 7\n     rx_priority_3_xoff.nic: 40\n"+
		"     tx_priority_3_xoff.nic: 12\n     rx_priority_4_xoff.nic: 99\n")
	p = &PFCStats{e: ice, prio: 3}
	if err := p.lookup(); err != nil {
		t.Fatal(err)
	}
	if c := pfcFrom(p.idx, vals); c != (PFCCounters{RxPause: 40, TxPause: 12}) {
		t.Fatalf("ice prio 3: %+v", c)
	}
	veth, _ := fakeStats(t, "     peer_ifindex: 4\n     rx_queue_0_xdp_packets: 0\n")
	p = &PFCStats{e: veth, prio: 3}
	if err := p.lookup(); err == nil || !strings.Contains(err.Error(), "no PFC pause counters of priority 3") {
		t.Fatalf("veth: %v", err)
	}
	if _, err := OpenPFCStats("eth0", 8); err == nil {
		t.Fatal("priority 8: want an error")
	}
}

// TestEthtoolStatsVeth reads a veth's statistics through the ioctl, in a
// namespace of its own, and compares them with what `ethtool -S` prints
// for the same interface; loopback has none.
func TestEthtoolStatsVeth(t *testing.T) {
	pr := netns.TestPair(t, "eth", 0)
	var e *EthtoolStats
	err := netns.Do(pr.NSA, func() (err error) {
		if _, err := OpenEthtoolStats("lo"); !errors.Is(err, ErrNoStats) {
			t.Errorf("lo: %v, want ErrNoStats", err)
		}
		if _, err := OpenEthtoolStats(pr.IfA + "x"); err == nil {
			t.Error("an interface that does not exist: want an error")
		}
		e, err = OpenEthtoolStats(pr.IfA)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	vals, changed, err := e.Read(nil)
	if err != nil || changed {
		t.Fatalf("read: %v (changed %v)", err, changed)
	}
	i, ok := e.Index("peer_ifindex")
	if !ok || len(vals) != len(e.Names()) || vals[i] == 0 {
		t.Fatalf("veth statistics %v = %v: no peer_ifindex", e.Names(), vals)
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Logf("ethtool not installed: not compared (%v)", err)
		return
	}
	out, err := exec.Command("ip", "netns", "exec", pr.NSA, "ethtool", "-S", pr.IfA).Output()
	if err != nil {
		t.Fatalf("ethtool -S: %v", err)
	}
	ref, refVals := fakeStats(t, string(out))
	if strings.Join(ref.Names(), ",") != strings.Join(e.Names(), ",") {
		t.Fatalf("names: ioctl %v, ethtool %v", e.Names(), ref.Names())
	}
	// The packet counters move with the namespace's traffic; the
	// peer's index does not.
	j, _ := ref.Index("peer_ifindex")
	if refVals[j] != vals[i] {
		t.Fatalf("peer_ifindex: ioctl %d, ethtool %d", vals[i], refVals[j])
	}
}

// TestPFCDurationSaturates: a pause duration past what ns hold (a
// driver's garbage) reads as the longest duration, not a negative one;
// and a statistics buffer shorter than its count is refused, not read
// past.
func TestPFCDurationSaturates(t *testing.T) {
	c := pfcFrom([4]int{0, 1, 2, 3}, []uint64{1, 2, 1 << 62, 9_223_372_036_854_775})
	if c.RxPauseNs != math.MaxInt64 || c.TxPauseNs != 9_223_372_036_854_775_000 {
		t.Fatalf("%+v", c)
	}
	if _, err := decodeGStats(make([]byte, 8), 0, nil); err != nil {
		t.Fatal(err)
	}
	short := gstrings("a", "b")
	if _, _, err := decodeGStrings(short[:len(short)-1], 2); err == nil {
		t.Fatal("a names buffer cut short accepted")
	}
	stats := make([]byte, 8+8)
	stats[4] = 2 // the kernel says 2 values, the buffer holds 1
	if _, err := decodeGStats(stats, 2, nil); err == nil {
		t.Fatal("a statistics buffer cut short accepted")
	}
}
