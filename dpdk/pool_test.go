package dpdk

import (
	"fmt"
	"strings"
	"testing"
)

func TestPoolGetPut(t *testing.T) {
	p, err := NewPool("t", 8, 256)
	if err != nil {
		t.Fatal(err)
	}
	var got [10]*Packet
	if n := p.GetBulk(got[:]); n != 8 {
		t.Fatalf("GetBulk = %d, want 8 (pool of 8)", n)
	}
	if p.Stats().AllocFails != 1 {
		t.Fatalf("short GetBulk not counted: %+v", p.Stats())
	}
	if p.Get() != nil {
		t.Fatal("Get on an empty pool returned a packet")
	}
	seen := map[*byte]bool{}
	for _, pkt := range got[:8] {
		b := pkt.Buffer()
		if len(b) != 256-Headroom {
			t.Fatalf("room %d, want %d", len(b), 256-Headroom)
		}
		if seen[&b[0]] {
			t.Fatal("two packets share a buffer")
		}
		seen[&b[0]] = true
	}
	FreeBulk(got[:8])
	if p.Available() != 8 {
		t.Fatalf("available %d after FreeBulk, want 8", p.Available())
	}
	got[0].Free() // double free: ignored and counted
	if s := p.Stats(); s.DoubleFrees != 1 || s.Available != 8 {
		t.Fatalf("double free: %+v", s)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPoolCloseInUse(t *testing.T) {
	p, err := NewPool("busy", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkt := p.Get()
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "still in use") {
		t.Fatalf("Close with a buffer out: %v", err)
	}
	pkt.Free()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPacketWindow(t *testing.T) {
	p, err := NewPool("w", 1, 512)
	if err != nil {
		t.Fatal(err)
	}
	pkt := p.Get()
	if pkt.CopyFrom([]byte("payload")) != 7 || string(pkt.Data()) != "payload" {
		t.Fatalf("CopyFrom: %q", pkt.Data())
	}
	h, err := pkt.Prepend(4)
	if err != nil {
		t.Fatal(err)
	}
	copy(h, "hdr:")
	if string(pkt.Data()) != "hdr:payload" {
		t.Fatalf("Prepend: %q", pkt.Data())
	}
	if err := pkt.Adj(4); err != nil || string(pkt.Data()) != "payload" {
		t.Fatalf("Adj: %q %v", pkt.Data(), err)
	}
	if err := pkt.Trim(3); err != nil || string(pkt.Data()) != "payl" {
		t.Fatalf("Trim: %q %v", pkt.Data(), err)
	}
	if err := pkt.SetLen(pkt.Room() + 1); err != ErrNoRoom {
		t.Fatalf("SetLen past room: %v", err)
	}
	if _, err := pkt.Prepend(Headroom + 100); err != ErrNoRoom {
		t.Fatalf("Prepend past headroom: %v", err)
	}
	if err := pkt.Adj(100); err != ErrNoRoom {
		t.Fatalf("Adj past data: %v", err)
	}
	pkt.Free()
	_ = p.Close()
}

func TestPoolAllocs(t *testing.T) {
	p, err := NewPool("a", 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	var burst [32]*Packet
	if a := testing.AllocsPerRun(1000, func() {
		n := p.GetBulk(burst[:])
		FreeBulk(burst[:n])
	}); a != 0 {
		t.Fatalf("GetBulk+FreeBulk allocates %v per burst", a)
	}
}

func TestParseCoreList(t *testing.T) {
	for in, want := range map[string]string{"0-3,5": "[0 1 2 3 5]", "7,1,1": "[1 7]", " 2 - 2 ": "[2]"} {
		got, err := ParseCoreList(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if fmt.Sprint(got) != want {
			t.Fatalf("%q = %v, want %s", in, got, want)
		}
	}
	// "0-4294967295" was expanded core by core (minutes, gigabytes).
	for _, bad := range []string{"", "a", "3-1", "-1", "1,,x", "0-4294967295", "65536"} {
		if _, err := ParseCoreList(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func TestCoreClaims(t *testing.T) {
	dir := t.TempDir()
	a := NewCoreClaims(dir)
	if err := a.Claim(0, "dumper"); err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(0, "injector"); err == nil || !strings.Contains(err.Error(), "dumper") {
		t.Fatalf("second claim in process: %v", err)
	}
	// Another claim table stands for another process: the lock file stops it.
	b := NewCoreClaims(dir)
	if err := b.Claim(0, "translator"); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("claim across tables: %v", err)
	}
	a.Release(0)
	if err := b.Claim(0, "translator"); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	b.Release(0)
}

func TestPin(t *testing.T) {
	cores, err := AllowedCores()
	if err != nil || len(cores) == 0 {
		t.Fatalf("AllowedCores: %v %v", cores, err)
	}
	done := make(chan error)
	go func() { done <- Pin(cores[len(cores)-1]) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := Pin(100000); err == nil {
		t.Fatal("pinning to a core that does not exist succeeded")
	}
}

func TestParsePortString(t *testing.T) {
	d, dev, opts, err := ParsePortString("afpacket:veth0,fanout=lb,blocks=8")
	if err != nil || d != "afpacket" || dev != "veth0" || opts["fanout"] != "lb" || opts["blocks"] != "8" {
		t.Fatalf("got %q %q %v %v", d, dev, opts, err)
	}
	for _, bad := range []string{"veth0", ":x", "ring:", "ring:a,b"} {
		if _, _, _, err := ParsePortString(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	if _, err := Open("nosuch:dev", Config{}); err == nil || !strings.Contains(err.Error(), "no such driver") {
		t.Fatalf("unknown driver: %v", err)
	}
}

func TestCache(t *testing.T) {
	p, err := NewPool("c", 100, 256)
	if err != nil {
		t.Fatal(err)
	}
	c := p.NewCache(16)
	var burst [10]*Packet
	if n := c.GetBulk(burst[:]); n != 10 {
		t.Fatalf("GetBulk %d", n)
	}
	// The refill took more than asked, to serve the next bursts from the cache.
	if p.Available() != 100-26 {
		t.Fatalf("pool has %d after a refill, want %d", p.Available(), 74)
	}
	c.PutBulk(burst[:])
	var many [60]*Packet
	n := 0
	for n < len(many) {
		n += c.GetBulk(many[n:min(n+10, len(many))])
	}
	c.PutBulk(many[:])
	if len(c.objs) > cap(c.objs) || len(c.objs) < c.size {
		t.Fatalf("cache holds %d (size %d)", len(c.objs), c.size)
	}
	c.Flush()
	if p.Available() != 100 {
		t.Fatalf("after Flush the pool has %d of 100", p.Available())
	}
	// Packets of another pool go home, not into this cache.
	other, _ := NewPool("o", 1, 256)
	op := other.Get()
	c.PutBulk([]*Packet{op})
	if other.Available() != 1 || len(c.objs) != 0 {
		t.Fatal("foreign packet kept by the cache")
	}
	if a := testing.AllocsPerRun(500, func() { c.PutBulk(burst[:c.GetBulk(burst[:])]) }); a != 0 {
		t.Fatalf("cache allocates %v", a)
	}
}

func TestOrigLenAndPortIDs(t *testing.T) {
	p, _ := NewPool("o", 1, 256)
	pkt := p.Get()
	pkt.CopyFrom(make([]byte, 64))
	if pkt.OrigLen() != 64 {
		t.Fatalf("whole frame: OrigLen %d", pkt.OrigLen())
	}
	pkt.WireLen = 1500 // a driver cut the frame to 64 bytes
	if pkt.OrigLen() != 1500 {
		t.Fatalf("snapped frame: OrigLen %d", pkt.OrigLen())
	}
	pkt.Free()
	if pkt = p.Get(); pkt.WireLen != 0 {
		t.Fatal("Reset kept WireLen")
	}
	pkt.Free()
	a, b := NewPortID(), NewPortID()
	if a == b || a < 1024 || b < 1024 {
		t.Fatalf("port ids %d %d", a, b)
	}
}

// TestCacheGet: Get takes one packet at a time through the cache and
// answers nil once the pool is empty; a flush gives them all back.
func TestCacheGet(t *testing.T) {
	p, err := NewPool("cg", 3, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := p.NewCache(2)
	var got []*Packet
	for pkt := c.Get(); pkt != nil; pkt = c.Get() {
		got = append(got, pkt)
	}
	if len(got) != 3 || p.Available() != 0 {
		t.Fatalf("got %d packets, %d left in the pool", len(got), p.Available())
	}
	c.PutBulk(got)
	c.Flush()
	if p.Available() != 3 {
		t.Fatalf("%d back in the pool, want 3", p.Available())
	}
}
