package hostmesh

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// TestNetdevOf finds the Ethernet interface of a RoCE GID where the kernel
// names it.
func TestNetdevOf(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "class", "infiniband", "mlx5_0", "ports", "1", "gid_attrs", "ndevs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "3"), []byte("enp1s0f0np0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := NetdevOf(root, "mlx5_0", 1, 3); err != nil || n != "enp1s0f0np0" {
		t.Fatalf("%q, %v", n, err)
	}
	if _, err := NetdevOf(root, "mlx5_0", 1, 0); err == nil {
		t.Fatal("GID without a netdev: want an error")
	}
}

// TestCorePFC: readings become the changes since the last one, from the
// first reading on; an interval without a pause uploads nothing; a
// counter that went backwards was reset.
func TestCorePFC(t *testing.T) {
	c, err := NewCore(Config{Host: "h"}, []RNIC{{Name: "a", Addr: netip.MustParseAddr("10.0.0.1")}, {Name: "b", Addr: netip.MustParseAddr("10.0.0.2")}})
	if err != nil {
		t.Fatal(err)
	}
	c.PFC(0, 100, PFCCounters{TxPause: 5, TxPauseNs: 50})
	c.PFC(1, 100, PFCCounters{RxPause: 7})
	c.PFC(0, 200, PFCCounters{TxPause: 9, TxPauseNs: 90, RxPause: 1, RxPauseNs: 3})
	c.PFC(1, 200, PFCCounters{RxPause: 7})
	c.PFC(1, 300, PFCCounters{RxPause: 2, RxPauseNs: 4})
	b := c.Batch()
	want := []hostmeshanalyzer.PFC{
		{RNIC: "a", From: 100, To: 200, TxPause: 4, TxPauseNs: 40, RxPause: 1, RxPauseNs: 3},
		{RNIC: "b", From: 200, To: 300, RxPause: 2, RxPauseNs: 4},
	}
	if len(b.PFC) != len(want) || b.PFC[0] != want[0] || b.PFC[1] != want[1] {
		t.Fatalf("batch %+v, want %+v", b.PFC, want)
	}
	if b = c.Batch(); len(b.PFC) != 0 {
		t.Fatalf("second batch %+v", b.PFC)
	}
}

// TestPauseAcct counts a pause until it runs out, is renewed, or an XON
// ends it, as the RNIC's duration counter does.
func TestPauseAcct(t *testing.T) {
	var p pauseAcct
	p.frame(0, 100) // paused 0..100
	p.frame(50, 100)
	p.settle(120) // renewed at 50: paused 0..120 so far
	if p.frames != 2 || p.ns != 120 {
		t.Fatalf("renewed: %+v", p)
	}
	p.frame(130, 0) // XON at 130, 20 before the renewed pause ran out
	p.frame(200, 1000)
	p.frame(250, 0) // XON at 250
	p.settle(400)
	if p.frames != 5 || p.ns != 130+50 {
		t.Fatalf("xon: %+v", p)
	}
}

// TestSysPFC: the netdev comes from sysfs, one without pause counters is
// named in the error, and reads after Close fail.
func TestSysPFC(t *testing.T) {
	h := newSoftHost(t, 1)
	d := h.devices()[0]
	root := t.TempDir()
	dir := filepath.Join(root, "class", "infiniband", d.Dev.Info().Name, "ports", strconv.Itoa(d.Port), "gid_attrs", "ndevs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(d.GIDIndex)), []byte("lo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewSysPFC(root, 3)
	if _, err := s.Read(context.Background(), d); err == nil || !strings.Contains(err.Error(), "ethtool lo") {
		t.Fatalf("loopback: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(context.Background(), d); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Fatalf("after Close: %v", err)
	}
}
