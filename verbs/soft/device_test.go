package soft

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs"
)

// TestProvider checks that devices appear in verbs.DeviceList, open through
// verbs.OpenDevice and leave on Close.
func TestProvider(t *testing.T) {
	l := ring.NewLink("prov", ring.Config{})
	d, err := NewDevice("softprov0", l.A(), Config{GIDs: []netip.Addr{netip.MustParseAddr("10.9.0.1"),
		netip.MustParseAddr("fd00::9")}, PoolSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDevice("softprov0", l.B(), Config{GIDs: []netip.Addr{netip.MustParseAddr("10.9.0.2")}}); err == nil {
		t.Fatal("duplicate name accepted")
	}
	devs, _ := verbs.DeviceList()
	found := false
	for _, di := range devs {
		if di.Name == "softprov0" && di.Provider == "soft" && di.CompletionTimestamps {
			found = true
		}
	}
	if !found {
		t.Fatalf("soft device not listed: %+v", devs)
	}
	v, err := verbs.OpenDevice("soft:softprov0")
	if err != nil || v != verbs.Device(d) {
		t.Fatalf("open: %v %v", v, err)
	}
	pa, err := d.QueryPort(1)
	if err != nil || len(pa.GIDs) != 2 || pa.ActiveMTU != verbs.MTU4096 || pa.State != verbs.PortActive {
		t.Fatalf("port: %+v %v", pa, err)
	}
	if _, err := d.QueryPort(2); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("port 2: %v", err)
	}
	must(t, d.Close())
	// The device's own pool is unmapped with it: nothing is left to take.
	if d.pool.Available() != 0 || d.pool.Get() != nil {
		t.Fatalf("the device's pool outlives it: %d buffers free", d.pool.Available())
	}
	if _, err := verbs.OpenDevice("softprov0"); !errors.Is(err, verbs.ErrNoDevice) {
		t.Fatalf("closed device still opens: %v", err)
	}
	if _, err := NewDevice("x", l.B(), Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("no GIDs: %v", err)
	}
}

// TestBadInput covers the ibverbs-like errors of the posting and control
// paths: invalid transitions, bad keys, oversize and malformed requests,
// posts in the wrong state, all reported with the failing index.
func TestBadInput(t *testing.T) {
	p := newPair(t, Config{}, Config{}, nil)
	x := newEnd(t, p.a, verbs.QPTypeRC, 4096, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, 4096, false)
	sge := []verbs.SGE{{Addr: x.mr.Addr(), Length: 8, LKey: x.mr.LKey()}}

	// Posting before RTS.
	err := x.qp.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, SGL: sge}})
	var pe *verbs.PostError
	if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, verbs.ErrBadState) {
		t.Fatalf("post in RESET: %v", err)
	}
	// Skipping INIT.
	if err := x.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR}, verbs.AttrState); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("RESET->RTR: %v", err)
	}
	connect(t, x, y, defaultRC())

	bad := []verbs.SendWR{
		{Opcode: verbs.WRSend, SGL: sge},
		{Opcode: verbs.WRSend, SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 8, LKey: 0xdead}}},
	}
	err = x.qp.PostSend(bad)
	if !errors.As(err, &pe) || pe.Index != 1 || !errors.Is(err, verbs.ErrBadKey) {
		t.Fatalf("bad lkey: %v", err)
	}
	cases := []struct {
		name string
		wr   verbs.SendWR
		want error
	}{
		{"outside region", verbs.SendWR{Opcode: verbs.WRSend, SGL: []verbs.SGE{{Addr: x.mr.Addr() + 4090, Length: 8, LKey: x.mr.LKey()}}}, verbs.ErrBadKey},
		{"too many SGEs", verbs.SendWR{Opcode: verbs.WRSend, SGL: make([]verbs.SGE, 5)}, verbs.ErrTooLarge},
		{"inline too long", verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline, SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 1000, LKey: x.mr.LKey()}}}, verbs.ErrTooLarge},
		{"unaligned atomic", verbs.SendWR{Opcode: verbs.WRAtomicFetchAndAdd, RemoteAddr: 3, SGL: sge}, verbs.ErrInvalidArgument},
		{"short atomic", verbs.SendWR{Opcode: verbs.WRAtomicCmpAndSwp, SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 4, LKey: x.mr.LKey()}}}, verbs.ErrInvalidArgument},
		{"bad opcode", verbs.SendWR{Opcode: 99, SGL: sge}, verbs.ErrInvalidArgument},
	}
	for _, c := range cases {
		err := x.qp.PostSend([]verbs.SendWR{c.wr})
		if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A receive into a region without local write.
	ro, err := y.pd.RegMR(make([]byte, 64), verbs.AccessRemoteRead)
	must(t, err)
	err = y.qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{{Addr: ro.Addr(), Length: 64, LKey: ro.LKey()}}}})
	if !errors.Is(err, verbs.ErrBadKey) {
		t.Fatalf("recv into read-only region: %v", err)
	}
	// Resources in use cannot be destroyed.
	if err := x.scq.Destroy(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("destroy busy CQ: %v", err)
	}
	if err := x.pd.Dealloc(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("dealloc busy PD: %v", err)
	}
	// Error state: posts fail.
	must(t, x.qp.Modify(&verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState))
	if err := x.qp.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, SGL: sge}}); !errors.Is(err, verbs.ErrBadState) {
		t.Fatalf("post in ERR: %v", err)
	}
	if err := x.qp.PostRecv([]verbs.RecvWR{{SGL: sge}}); !errors.Is(err, verbs.ErrBadState) {
		t.Fatalf("post recv in ERR: %v", err)
	}
	a, err := x.qp.Query()
	if err != nil || a.State != verbs.QPSErr {
		t.Fatalf("query: %+v %v", a, err)
	}
	must(t, x.qp.Destroy())
	if err := x.qp.Destroy(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("double destroy: %v", err)
	}
	must(t, x.mr.Dereg())
	must(t, x.scq.Destroy())
	if _, err := x.scq.Poll(make([]verbs.WC, 1)); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("poll destroyed CQ: %v", err)
	}
}

// TestKeysUnpredictable: an rkey is all that guards a region from a peer
// that reaches a QP, so the same registrations on two devices get
// different keys, a device's keys are not a sequence, and a
// deregistered region's key opens nothing.
func TestKeysUnpredictable(t *testing.T) {
	keys := func(name string) []uint32 {
		l := ring.NewLink(name, ring.Config{})
		d, err := NewDevice(name, l.A(), Config{GIDs: []netip.Addr{netip.MustParseAddr("10.9.0.1")}, PoolSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		pd, err := d.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		var ks []uint32
		for range 4 {
			mr, err := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			ks = append(ks, mr.RKey())
			must(t, mr.Dereg())
			if d.keys.lookup(mr.RKey()) != nil {
				t.Fatalf("key %#x still opens a region after Dereg", mr.RKey())
			}
		}
		return ks
	}
	a, b := keys("softkeys0"), keys("softkeys1")
	if a[0] == b[0] {
		t.Fatalf("two devices gave their first region the same key %#x", a[0])
	}
	for i := 1; i < len(a); i++ {
		if a[i]>>8 == a[0]>>8 || (i > 1 && a[i]-a[i-1] == a[1]-a[0]) {
			t.Fatalf("keys %#x follow a pattern", a)
		}
	}
}
