package dtacollector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
	"github.com/rdma-appliance/appliance/verbs/roce"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// beds numbers the beds: ring links, soft RNICs and pools have
// process-wide names.
var beds atomic.Int64

var (
	transIP = netip.MustParseAddr("10.9.0.100")
	collIP  = netip.MustParseAddr("10.9.0.1")
)

// bed is a Collector on a soft RNIC at one end of a ring link, serving
// the exchange on loopback; the test plays the translator at the other
// end of the link.
type bed struct {
	t    *testing.T
	c    *Collector
	addr string // the exchange
	port dpdk.Port
	pool *dpdk.Pool
	mac  header.MAC
	key  []byte // the spec's, which dial authenticates with
	nd   *neighbors
	// layout is the one the test's translators say they write.
	layout dtamem.Layout
}

func newBed(t *testing.T, yml string, opt Options) *bed {
	t.Helper()
	return newBedWith(t, yml, opt, nil)
}

// neighbors records the neighbour entries the collector adds.
type neighbors struct {
	*soft.Device
	mu    sync.Mutex
	added []netip.Addr
}

func (n *neighbors) AddNeighbor(ip netip.Addr, mac header.MAC) {
	n.mu.Lock()
	n.added = append(n.added, ip)
	n.mu.Unlock()
	n.Device.AddNeighbor(ip, mac)
}

func (n *neighbors) list() []netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.added)
}

// newBedWith is newBed with the decoded spec changed by edit.
func newBedWith(t *testing.T, yml string, opt Options, edit func(*Spec)) *bed {
	t.Helper()
	// The bed serves the exchange on loopback, where no key is needed;
	// a test that wants one sets it in the spec.
	s, err := DecodeSpec("test.yml", []byte("exchange: 127.0.0.1:0\n"+yml))
	if err != nil {
		t.Fatal(err)
	}
	id := beds.Add(1)
	l := ring.NewLink(fmt.Sprintf("dtac%d", id), ring.Config{RingSize: 4096})
	dev, err := soft.NewDevice(fmt.Sprintf("dtacoll%d", id), l.B(), soft.Config{GIDs: []netip.Addr{collIP}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := dpdk.NewPool(fmt.Sprintf("dtact%d", id), 8192, 0)
	if err != nil {
		t.Fatal(err)
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if edit != nil {
		edit(&s)
	}
	nd := &neighbors{Device: dev}
	c, err := New(s, nd, opt)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		// A test that closed the collector itself may do so before
		// Serve got going, which then says so.
		if err := <-served; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
		dev.Close()
		cancel()
		l.A().Close()
		l.B().Close()
		pool.Close()
	})
	return &bed{t: t, c: c, addr: ln.Addr().String(), port: l.A(), pool: pool, mac: header.MAC(l.A().Info().MAC), key: s.Key, nd: nd}
}

// translator is the test's translator: one RC connection set up
// through the exchange.
type translator struct {
	b     *bed
	tcp   net.Conn
	offer *dtamem.Offer
	conn  *dtatranslator.Conn
	tr    *dtatranslator.Translator
	// drop is how many of the next frames emit loses on the way.
	drop int
}

func (b *bed) dial(qpn, psn uint32) *translator {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tcp, offer, err := dtamem.Dial(ctx, b.addr, dtamem.Hello{Name: "trans0", IP: transIP, MAC: b.mac.String(), QPN: qpn, PSN: psn, Layout: b.layout}, b.key)
	if err != nil {
		b.t.Fatal(err)
	}
	peer, err := offer.Endpoint()
	if err != nil {
		b.t.Fatal(err)
	}
	conn := dtatranslator.NewConn(dtamem.Endpoint{MAC: b.mac, GID: roce.GIDFromAddr(transIP), QPN: qpn}, peer, psn)
	conn.MaxAtomic = offer.MaxAtomic
	tr, err := dtatranslator.NewTranslator(conn, offer.Regions)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { tcp.Close() })
	return &translator{b: b, tcp: tcp, offer: offer, conn: conn, tr: tr}
}

// emit sends a frame to the collector.
func (x *translator) emit(frame []byte) error {
	b := x.b
	if x.drop > 0 {
		x.drop--
		return nil
	}
	p := b.pool.Get()
	for deadline := time.Now().Add(5 * time.Second); p == nil; p = b.pool.Get() {
		if time.Now().After(deadline) {
			return fmt.Errorf("pool empty")
		}
		time.Sleep(10 * time.Microsecond)
	}
	p.CopyFrom(frame)
	for deadline := time.Now().Add(5 * time.Second); b.port.TxBurst(0, []*dpdk.Packet{p}) == 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("ring full")
		}
		time.Sleep(10 * time.Microsecond)
	}
	return nil
}

// answers feeds the collector's ACKs and NAKs to the connection.
func (x *translator) answers() {
	var burst [32]*dpdk.Packet
	var p roce.Packet
	for n := x.b.port.RxBurst(0, burst[:]); n > 0; n = x.b.port.RxBurst(0, burst[:]) {
		for _, pkt := range burst[:n] {
			if roce.Parse(pkt.Data(), &p) == nil && p.AETH(pkt.Data()) != nil {
				_, _ = x.conn.Input(&p, pkt.Data())
			}
		}
		dpdk.FreeBulk(burst[:n])
	}
}

// send translates a report, waiting for the atomic window when full.
func (x *translator) send(r *dtawire.Report) {
	x.b.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		err := x.tr.Translate(r, x.emit)
		if err == nil {
			break
		}
		if !errors.Is(err, dtatranslator.ErrAtomicWindow) || time.Now().After(deadline) {
			x.b.t.Fatal(err)
		}
		x.answers()
	}
	x.answers()
}

// settle flushes batches and waits until the collector acknowledged
// everything: its RNIC has then applied every operation.
func (x *translator) settle() {
	x.b.t.Helper()
	if err := x.tr.Flush(0, x.emit); err != nil {
		x.b.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); x.conn.Outstanding() > 0; time.Sleep(time.Millisecond) {
		x.answers()
		if time.Now().After(deadline) {
			x.b.t.Fatalf("%d packets unacknowledged; conn %+v", x.conn.Outstanding(), x.conn.Stats)
		}
	}
	if x.conn.Stats.Resyncs != 0 {
		x.b.t.Fatalf("the collector NAKed: %+v", x.conn.Stats)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

const allSpec = `
name: c0
mtu: 1024
redundancy: 2
key-write: {slots: 65536}
key-increment: {slots: 4096}
append:
  batch: 4
  lists:
    - {id: 1, entries: 256, pollers: 3}
    - {id: 2, entries: 64}
sketches:
  - {id: 7, kind: count-min, columns: 256, rows: 4, reporters: 2, group: 16}
  - {id: 8, kind: hyperloglog, columns: 64, rows: 4, reporters: 1}
postcards: {slots: 4096, hops: 4}
`

func u32(v uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return b[:]
}

// loaded is the bed after a translator wrote every primitive, and what
// it wrote.
type loaded struct {
	*bed
	x       *translator
	kw      map[uint32]uint32
	ki      map[uint32]uint64
	cm      [2]*dtamem.Sketch
	hllKeys int
	paths   map[uint32][]uint32
	lists   map[uint32][]uint32
	seen    map[uint32]map[uint64]int // list -> position -> times read
	seenMu  sync.Mutex
	seenVal map[uint32]map[uint64]uint32
}

// load writes every primitive through a translator.
func load(t *testing.T) *loaded {
	ld := &loaded{kw: map[uint32]uint32{}, ki: map[uint32]uint64{}, paths: map[uint32][]uint32{},
		lists: map[uint32][]uint32{}, seen: map[uint32]map[uint64]int{}, seenVal: map[uint32]map[uint64]uint32{}}
	ld.bed = newBed(t, allSpec, Options{OnEntry: func(list uint32, pos uint64, data uint32) {
		ld.seenMu.Lock()
		defer ld.seenMu.Unlock()
		if ld.seen[list] == nil {
			ld.seen[list], ld.seenVal[list] = map[uint64]int{}, map[uint64]uint32{}
		}
		ld.seen[list][pos]++
		ld.seenVal[list][pos] = data
	}})
	x := ld.dial(0x77, 1000)
	ld.x = x
	for k := uint32(1); k <= 300; k++ {
		ld.kw[k] = k*7 + 1
		x.send(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: u32(k*7 + 1), Immediate: k <= 5})
		ld.ki[k%20] += uint64(k)
		x.send(&dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: 2, Key: k % 20, Counter: uint64(k)})
	}
	// List 1 laps its 256-entry ring once while its pollers keep up.
	for i := uint32(0); i < 400; i++ {
		ld.lists[1] = append(ld.lists[1], 5000+i)
		x.send(&dtawire.Report{Opcode: dtawire.OpAppend, ListID: 1, Data: u32(5000 + i)})
		if i%100 == 99 {
			x.settle()
			want := uint64(len(ld.lists[1]))
			waitFor(t, "the pollers of list 1", func() bool { st, _ := ld.c.List(1, 0); return st.Read == want })
		}
	}
	for i := uint32(0); i < 10; i++ {
		ld.lists[2] = append(ld.lists[2], i) // zero data too
		x.send(&dtawire.Report{Opcode: dtawire.OpAppend, ListID: 2, Data: u32(i)})
	}
	// Sketches: two reporters' Count-Min merged, one HyperLogLog.
	cmReg := x.offer.Regions.Sketches[7]
	hllReg := x.offer.Regions.Sketches[8]
	var scratch [dtawire.MaxSketchCounters * 4]byte
	for rep := range 2 {
		ld.cm[rep] = dtamem.NewSketch(&cmReg)
		for k := uint32(0); k < 40; k++ {
			ld.cm[rep].Add(k, k+uint32(rep)+1)
		}
	}
	for col := uint32(0); col < cmReg.Columns; col++ {
		for rep := range 2 {
			var r dtawire.Report
			ld.cm[rep].Report(&r, 7, uint16(rep), col, scratch[:])
			x.send(&r)
		}
	}
	hll := dtamem.NewSketch(&hllReg)
	ld.hllKeys = 2000
	for k := range ld.hllKeys {
		hll.Add(uint32(k), 0)
	}
	for col := uint32(0); col < hllReg.Columns; col++ {
		var r dtawire.Report
		hll.Report(&r, 8, 0, col, scratch[:])
		x.send(&r)
	}
	for f := uint32(100); f < 110; f++ {
		for h := uint8(0); h < 4; h++ {
			ld.paths[f] = append(ld.paths[f], f*10+uint32(h))
			x.send(&dtawire.Report{Opcode: dtawire.OpPostcarder, Key: f, Hop: h, Data: u32(f*10 + uint32(h))})
		}
	}
	// Flow 120: hops 1 and 3 never report, so the flush writes the
	// record incomplete.
	for _, h := range []uint8{0, 2} {
		x.send(&dtawire.Report{Opcode: dtawire.OpPostcarder, Key: 120, Hop: h, Data: u32(1200 + uint32(h))})
	}
	x.settle()
	for id, vals := range ld.lists {
		want := uint64(len(vals))
		waitFor(t, fmt.Sprintf("the pollers of list %d", id), func() bool { st, _ := ld.c.List(id, 0); return st.Read == want })
	}
	return ld
}

// TestEndToEnd: a translator set up through the exchange writes every
// primitive into the collector's memory over the soft RNIC; every query
// answers what was reported.
func TestEndToEnd(t *testing.T) {
	ld := load(t)
	c := ld.c
	both := 0
	for k, v := range ld.kw {
		got, err := c.KeyWrite(k, 0)
		if err != nil || got.Value != v || got.Matching < 1 || got.Agreeing != got.Matching {
			t.Fatalf("key-write %d: %+v %v, want %d", k, got, err, v)
		}
		// A slot a later key overwrote fails the checksum: two slots
		// agree unless that happened.
		got, err = c.KeyWrite(k, 2)
		switch {
		case got.Matching == 2 && (err != nil || got.Value != v):
			t.Fatalf("key-write %d with consensus 2: %+v %v", k, got, err)
		case got.Matching < 2 && !errors.Is(err, ErrNoConsensus):
			t.Fatalf("key-write %d with one slot left: %+v %v", k, got, err)
		case got.Matching == 2:
			both++
		}
	}
	if both < len(ld.kw)*95/100 {
		t.Fatalf("only %d of %d keys hold both slots", both, len(ld.kw))
	}
	if _, err := c.KeyWrite(100000, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown key: %v", err)
	}
	for k, v := range ld.ki {
		if got, err := c.KeyIncrement(k); err != nil || got.Count != v {
			t.Fatalf("key-increment %d: %+v %v, want %d", k, got, err, v)
		}
	}
	for k := uint32(0); k < 40; k++ {
		want := 2*k + 3
		got, err := c.SketchCount(7, k)
		if err != nil || got.Count < want {
			t.Fatalf("sketch count %d: %+v %v, want at least %d", k, got, err, want)
		}
	}
	card, err := c.SketchCardinality(8)
	if err != nil || card.Cardinality < 0.7*float64(ld.hllKeys) || card.Cardinality > 1.3*float64(ld.hllKeys) {
		t.Fatalf("cardinality %+v %v, want about %d", card, err, ld.hllKeys)
	}
	for f, hops := range ld.paths {
		got, err := c.Postcard(f)
		if err != nil || !got.Complete || fmt.Sprint(got.Hops) != fmt.Sprint(hops) {
			t.Fatalf("postcard %d: %+v %v, want %v", f, got, err, hops)
		}
	}
	if _, err := c.Postcard(99); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown flow: %v", err)
	}
	checkPostcards(t, c, ld.paths)
	// Push notifications: five Key-Writes with the immediate flag, N=2.
	waitFor(t, "push notifications", func() bool { n, _ := c.Pushes(); return n == 10 })
	_, recent := c.Pushes()
	if len(recent) != 10 || recent[0].Key != 1 || recent[9].Key != 5 || recent[0].Translator != "trans0" {
		t.Fatalf("recent pushes %+v", recent)
	}
	if conns := c.Connections(); len(conns) != 1 || conns[0].Pushes != 10 || conns[0].State != "RTR" ||
		conns[0].TranslatorQPN != 0x77 || conns[0].QPN != ld.x.offer.QPN {
		t.Fatalf("connections %+v", conns)
	}
}

// TestPollersShareList: the pollers sharing a list read every entry once,
// with its data, across a lap of the ring; the recent entries are the
// latest ones, in order.
func TestPollersShareList(t *testing.T) {
	ld := load(t)
	ld.seenMu.Lock()
	defer ld.seenMu.Unlock()
	for id, vals := range ld.lists {
		if len(ld.seen[id]) != len(vals) {
			t.Fatalf("list %d: %d positions read, want %d", id, len(ld.seen[id]), len(vals))
		}
		for pos, v := range vals {
			if n := ld.seen[id][uint64(pos)]; n != 1 {
				t.Fatalf("list %d position %d read %d times", id, pos, n)
			}
			if got := ld.seenVal[id][uint64(pos)]; got != v {
				t.Fatalf("list %d position %d: %d, want %d", id, pos, got, v)
			}
		}
	}
	st, err := ld.c.List(1, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pollers) != 3 || st.Read != 400 {
		t.Fatalf("list 1: %+v", st)
	}
	for _, p := range st.Pollers {
		// 400 positions dealt round-robin to three pollers.
		if p.Read < 133 || p.Read > 134 {
			t.Fatalf("list 1 poller %d read %d", p.Index, p.Read)
		}
	}
	if len(st.Recent) != 8 {
		t.Fatalf("recent %+v", st.Recent)
	}
	for i, e := range st.Recent {
		if e.Pos != uint64(392+i) || e.Data != 5000+392+uint32(i) {
			t.Fatalf("recent %d: %+v", i, e)
		}
	}
}

// TestListHoles: a lost Append WRITE leaves a hole in the ring that no
// later write fills (the translator keeps nothing to resend, and the
// collector drops what follows the loss until the NAK resynchronises
// the translator). Its pollers skip the hole once later entries show it,
// count its positions as lost, and read every entry that did land.
func TestListHoles(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]uint32{}
	b := newBed(t, allSpec, Options{OnEntry: func(list uint32, pos uint64, data uint32) {
		mu.Lock()
		defer mu.Unlock()
		if list == 1 {
			seen[pos] = data
		}
	}})
	x := b.dial(0x21, 7000)
	appends := func(from, n uint32) {
		for i := from; i < from+n; i++ {
			x.send(&dtawire.Report{Opcode: dtawire.OpAppend, ListID: 1, Data: u32(9000 + i)})
		}
	}
	appends(0, 40)
	x.settle()
	waitFor(t, "the first 40 entries", func() bool { st, _ := b.c.List(1, 0); return st.Read == 40 })
	// Batches of 4: positions 40-43 are lost on the way, 44-47 arrive out
	// of sequence and are NAKed; the translator goes on from 48.
	x.drop = 1
	appends(40, 8)
	waitFor(t, "the NAK", func() bool { x.answers(); return x.conn.Stats.Resyncs == 1 })
	appends(48, 40)
	if err := x.tr.Flush(0, x.emit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pollers past the hole", func() bool { st, _ := b.c.List(1, 0); return st.Read+st.Lost == 88 })
	st, err := b.c.List(1, 8)
	if err != nil {
		t.Fatal(err)
	}
	if st.Read != 80 || st.Lost != 8 {
		t.Fatalf("read %d, lost %d; want 80 and 8", st.Read, st.Lost)
	}
	mu.Lock()
	defer mu.Unlock()
	for pos := uint64(0); pos < 88; pos++ {
		d, ok := seen[pos]
		if lost := pos >= 40 && pos < 48; ok == lost || ok && d != 9000+uint32(pos) {
			t.Fatalf("position %d: read %v (%d), lost %v", pos, ok, d, lost)
		}
	}
	if len(st.Recent) != 8 || st.Recent[0].Pos != 80 || st.Recent[7].Data != 9087 {
		t.Fatalf("recent %+v", st.Recent)
	}
	var lost uint64
	for _, p := range st.Pollers {
		lost += p.Lost
	}
	if lost != 8 {
		t.Fatalf("pollers %+v", st.Pollers)
	}
}

// TestConsensus: a Key-Write with N=1 updates only the key's first slot;
// its slots then disagree, and a query asking two of them to agree is
// refused until a report with N=2 rewrites both.
func TestConsensus(t *testing.T) {
	b := newBed(t, allSpec, Options{})
	x := b.dial(0x55, 7)
	x.send(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 42, Data: u32(1)})
	x.send(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 1, Key: 42, Data: u32(2)})
	x.settle()
	got, err := b.c.KeyWrite(42, 0)
	if err != nil || got.Value != 2 || got.Matching != 2 || got.Agreeing != 1 {
		t.Fatalf("no consensus asked: %+v %v", got, err)
	}
	if got, err := b.c.KeyWrite(42, 1); err != nil || got.Value != 2 {
		t.Fatalf("consensus 1: %+v %v", got, err)
	}
	if _, err := b.c.KeyWrite(42, 2); !errors.Is(err, ErrNoConsensus) {
		t.Fatalf("consensus 2 over disagreeing slots: %v", err)
	}
	if _, err := b.c.KeyWrite(42, 3); !errors.Is(err, ErrBadQuery) {
		t.Fatalf("consensus 3 of 2 slots: %v", err)
	}
	x.send(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 42, Data: u32(3)})
	x.settle()
	if got, err := b.c.KeyWrite(42, 2); err != nil || got.Value != 3 || got.Agreeing != 2 {
		t.Fatalf("consensus 2 after N=2: %+v %v", got, err)
	}
}

// TestUnknown: lists, sketches and primitives the collector does not
// have are errors that say so.
func TestUnknown(t *testing.T) {
	b := newBed(t, `
key-write: {slots: 1024}
sketches: [{id: 3, kind: count-min, columns: 64, rows: 2, reporters: 1}]
`, Options{})
	c := b.c
	for _, tc := range []struct {
		err  error
		want error
		text string
	}{
		{second(c.KeyIncrement(1)), ErrNotServed, "key-increment: not served"},
		{second(c.Postcard(1)), ErrNotServed, "postcarder: not served"},
		{second(c.List(1, 0)), ErrNotServed, "append: not served"},
		{second(c.SketchCount(4, 1)), ErrUnknownSketch, "sketch 4: no such sketch"},
		{second(c.SketchCardinality(3)), ErrBadQuery, "cardinality needs hyperloglog"},
		{second(c.KeyWrite(9, 0)), ErrNotFound, "key-write key 9: not found"},
	} {
		if !errors.Is(tc.err, tc.want) || !contains(tc.err.Error(), tc.text) {
			t.Errorf("%v: want %v saying %q", tc.err, tc.want, tc.text)
		}
	}
	ld := load(t)
	if _, err := ld.c.List(9, 0); !errors.Is(err, ErrUnknownList) || !contains(err.Error(), "list 9: no such Append list") {
		t.Errorf("unknown list: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestReconnect: a translator that goes away loses its QP; when it comes
// back it gets a fresh QP at its new PSN, and its reports land again.
func TestReconnect(t *testing.T) {
	b := newBed(t, allSpec, Options{})
	x := b.dial(0x10, 500)
	x.send(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 1, Data: u32(11)})
	x.settle()
	first := x.offer.QPN
	if conns := b.c.Connections(); len(conns) != 1 || conns[0].QPN != first {
		t.Fatalf("connections %+v", conns)
	}
	x.tcp.Close()
	waitFor(t, "the QP to go", func() bool { return len(b.c.Connections()) == 0 })

	y := b.dial(0x11, 90000)
	if y.offer.QPN == first {
		t.Fatalf("the new connection got the old QP %#x", first)
	}
	y.send(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 2, Data: u32(22)})
	y.settle()
	if got, err := b.c.KeyWrite(2, 2); err != nil || got.Value != 22 {
		t.Fatalf("after reconnecting: %+v %v", got, err)
	}
	if got, err := b.c.KeyWrite(1, 2); err != nil || got.Value != 11 {
		t.Fatalf("memory written before: %+v %v", got, err)
	}
	conns := b.c.Connections()
	if len(conns) != 1 || conns[0].QPN != y.offer.QPN || conns[0].FirstPSN != 90000 || conns[0].TranslatorQPN != 0x11 {
		t.Fatalf("connections %+v", conns)
	}
	st := b.c.Stats()
	if st.Connects != 2 || st.Connections != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRefusedHello: a Hello without an address is answered with an
// offer carrying the reason, and no QP is made.
func TestRefusedHello(t *testing.T) {
	b := newBed(t, allSpec, Options{})
	tc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if err := dtamem.WriteMsg(tc, &dtamem.Hello{Name: "bad", MAC: "02:00:00:00:00:01", QPN: 5}); err != nil {
		t.Fatal(err)
	}
	var o dtamem.Offer
	if err := dtamem.ReadMsg(dtamem.NewMsgReader(tc), &o); err != nil {
		t.Fatal(err)
	}
	if o.Error == "" || o.QPN != 0 || !contains(o.Error, "without an IP") {
		t.Fatalf("offer %+v", o)
	}
	// An IPv6 translator cannot reach an IPv4 GID.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err = dtamem.Dial(ctx, b.addr, dtamem.Hello{Name: "v6", IP: netip.MustParseAddr("fd00::1"), MAC: "02:00:00:00:00:01", QPN: 5}, nil)
	if err == nil || !contains(err.Error(), "different IP versions") {
		t.Fatalf("IPv6 translator: %v", err)
	}
	if st := b.c.Stats(); st.Refused != 2 || st.Connections != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPinnedPollers: a list's pollers claim the cores the spec gives
// them; a second collector asking for a claimed core is refused, naming
// the owner, and frees what it took.
func TestPinnedPollers(t *testing.T) {
	claims := dpdk.NewCoreClaims("")
	const yml = "append: {lists: [{id: 3, entries: 64, pollers: 1, cores: \"0\"}]}\n"
	b := newBed(t, yml, Options{Claims: claims})
	if owner := claims.Owner(0); !contains(owner, "list 3 poller 0") {
		t.Fatalf("core 0 owned by %q", owner)
	}
	st, err := b.c.List(3, 0)
	if err != nil || st.Pollers[0].Core != 0 {
		t.Fatalf("list 3: %+v %v", st, err)
	}
	s, err := DecodeSpec("again.yml", []byte("exchange: 127.0.0.1:0\n"+yml))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(s, b.c.dev, Options{Claims: claims, Log: slog.New(slog.DiscardHandler)}); err == nil || !contains(err.Error(), "list 3 poller 0") {
		t.Fatalf("a second poller on core 0: %v", err)
	}
	b.c.Close()
	if owner := claims.Owner(0); owner != "" {
		t.Fatalf("core 0 still owned by %q after Close", owner)
	}
}

var _ neighborAdder = (*soft.Device)(nil)

// TestTranslatorService: translator/dtatranslator's translator service sets its
// connection up with this collector through the exchange, and when it
// stops, the collector tears the QP down.
func TestTranslatorService(t *testing.T) {
	b := newBed(t, allSpec, Options{})
	ts, err := dtatranslator.DecodeSpec("translator.yml", []byte(fmt.Sprintf(
		"name: tsvc\nip: %s\ncollectors: [{name: c0, exchange: %q}]\n", transIP, b.addr)))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := dtatranslator.NewService(ts, b.port, b.pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sv.Run(ctx) }()
	waitFor(t, "the translator's connection", func() bool {
		conns := b.c.Connections()
		st := sv.Status()
		return len(conns) == 1 && len(st.Collectors) == 1 && st.Collectors[0].Up && st.Collectors[0].QPN == conns[0].QPN
	})
	if conns := b.c.Connections(); conns[0].Translator != "tsvc" || conns[0].IP != transIP.String() {
		t.Fatalf("connections %+v", conns)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	waitFor(t, "the QP to go", func() bool { return len(b.c.Connections()) == 0 })
}

// checkPostcards: an incomplete record says so and names its missing
// hops; a check against a path compares every hop of a complete record
// and every reported hop of an incomplete one.
func checkPostcards(t *testing.T, c *Collector, paths map[uint32][]uint32) {
	t.Helper()
	inc, err := c.Postcard(120)
	if err != nil || inc.Complete || inc.Reported != 2 || fmt.Sprint(inc.Missing) != "[1 3]" || fmt.Sprint(inc.Hops) != "[1200 0 1202 0]" {
		t.Fatalf("incomplete flow 120: %+v %v, want hops 0 and 2 of 4, 1 and 3 missing", inc, err)
	}
	for _, tc := range []struct {
		key  uint32
		want []uint32
		err  error
		says string
	}{
		{104, paths[104], nil, ""},
		{104, []uint32{1040, 1041, 9, 1043}, ErrMismatch, "hop 2 has 1042, expected 9"},
		{104, []uint32{1040, 1041, 1042, 7}, ErrMismatch, "hop 3 has 1043, expected 7"},
		{104, []uint32{1, 1041, 1042, 1043}, ErrMismatch, "hop 0 has 1040, expected 1"},
		{120, []uint32{1200, 5, 1202, 6}, nil, ""}, // the missing hops are not checked
		{120, []uint32{1200, 1201, 1203, 1203}, ErrMismatch, "hop 2 has 1202, expected 1203"},
		{104, []uint32{1040, 1041, 1042}, ErrBadQuery, "3 expected hops for a 4-hop table"},
		{99, paths[104], ErrNotFound, "not found"},
	} {
		res, err := c.PostcardCheck(tc.key, tc.want)
		if !errors.Is(err, tc.err) || (err != nil && !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("check %d against %v: %+v %v, want %v saying %q", tc.key, tc.want, res, err, tc.err, tc.says)
		}
	}
}
