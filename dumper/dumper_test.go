package dumper

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestCaptureAndWrite sends mirrored copies over two queues (one queue
// gets a stretch out of order) plus frames that are not copies, stops the
// dumper and checks the files: sorted by sequence, restored (ports, ECN,
// ICRC intact when the snap holds the whole frame), stamped with the
// extended mirror timestamp, malformed frames counted by reason; and the
// two files merge into a trace that passes Lumina's integrity check.
//
// The slots cases run the path of ports that fill the arena themselves
// (SlotReader).
func TestCaptureAndWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		snap  int
		zstd  bool
		slots bool
	}{{"snap128", 128, false, false}, {"whole-zstd", 2048, true, false}, {"slots-snap128", 128, false, true},
		{"slots-whole", 2048, false, true}} {
		t.Run(tc.name, func(t *testing.T) { captureAndWrite(t, tc.snap, tc.zstd, tc.slots) })
	}
}

func captureAndWrite(t *testing.T, snap int, zst, slots bool) {
	f, port := newFeeder(t, 2, 1024)
	var sp *slotPort
	if slots {
		sp = newSlotPort(port)
		port = sp
	}
	dir := t.TempDir()
	d, err := New(Config{Name: "rm", Port: port, SnapLen: snap, NumPkts: 4095, Dir: dir, File: "dump.pcap", Zstd: zst})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); !errors.Is(err, ErrRunning) {
		t.Fatalf("second start: %v", err)
	}
	const n = 2000
	base := time.Now().UnixNano()
	buf := make([]byte, 2048)
	var order []uint64
	for s := uint64(1); s <= n; s++ {
		order = append(order, s)
	}
	// Swap neighbours in a stretch of queue 1's share.
	for i := 101; i < 200; i += 4 {
		order[i], order[i+2] = order[i+2], order[i]
	}
	frames := map[uint64][]byte{}
	for _, s := range order {
		k := mirrored(buf, s, base)
		frames[s] = append([]byte(nil), buf[:k]...)
		f.send(int(s%2), buf[:k])
	}
	// Frames that are not copies: a runt, ICMP, DNS.
	f.send(0, []byte{1, 2, 3})
	k := mirrored(buf, 1, base)
	ip := header.IPv4(buf[header.EthernetHeaderLen:])
	ip[9] = header.IPProtoICMP
	ip.UpdateChecksum()
	f.send(0, buf[:k])
	b := roce.Builder{SrcGID: roce.GIDFromAddr(reqIP), DstGID: roce.GIDFromAddr(respIP), Opcode: roce.RCSendOnly, DstPort: 53, HopLimit: 64}
	k, _ = b.BuildInPlace(buf, 10)
	f.send(1, buf[:k])
	waitReceived(t, d, n+3)
	res, err := d.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stop(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("second stop: %v", err)
	}
	if res.Captured != n+3 || res.Written != n || res.ArenaFull != 0 || len(res.Files) != 2 {
		t.Fatalf("result %+v", res)
	}
	if sp != nil && sp.calls.Load() == 0 {
		t.Fatal("the dumper did not read through ReadSlots")
	}
	wantMal := map[string]uint64{"short": 1, "not-udp": 1, "foreign-port": 1}
	for r, v := range wantMal {
		if res.Malformed[r] != v {
			t.Fatalf("malformed %v, want %v", res.Malformed, wantMal)
		}
	}
	var srcs []trace.Source
	for _, fl := range res.Files {
		want := filepath.Join(dir, "dump-q"+string(rune('0'+fl.Queue))+".pcap")
		if zst {
			want += ".zst"
		}
		if fl.Path != want {
			t.Fatalf("file %s, want %s", fl.Path, want)
		}
		if fl.Queue == 1 && fl.OutOfOrder == 0 {
			t.Fatal("queue 1 arrived out of order but none counted")
		}
		srcs = append(srcs, trace.Source{Name: fl.Name, Path: fl.Path})
		checkFile(t, fl, snap, base, frames)
	}
	out, err := pcap.Create(filepath.Join(dir, "merged.pcap"), pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := trace.Merge(context.Background(), srcs, out, trace.Options{Mirrored: n, RxRoCE: n, FirstSeq: 1})
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	out.Close()
	if rep.Packets != n {
		t.Fatalf("merged %d packets", rep.Packets)
	}
}

// checkFile reads one written pcap and compares it with the copies sent.
func checkFile(t *testing.T, fl File, snap int, base int64, frames map[uint64][]byte) {
	t.Helper()
	r, err := pcap.Open(fl.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rec pcap.Record
	var last uint64
	var count uint64
	var np header.Parsed
	var rp roce.Packet
	for {
		if err := r.Next(&rec); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		count++
		m, err := func() (mirror.Meta, error) {
			if err := header.DecodeTruncated(rec.Data, &np); err != nil {
				return mirror.Meta{}, err
			}
			return mirror.Read(rec.Data, &np)
		}()
		if err != nil {
			t.Fatal(err)
		}
		if m.Seq <= last {
			t.Fatalf("%s: seq %d after %d", fl.Name, m.Seq, last)
		}
		last = m.Seq
		orig := frames[m.Seq]
		if rec.OrigLen != len(orig) || rec.CapLen != min(snap, len(orig)) {
			t.Fatalf("seq %d: caplen %d origlen %d, frame %d", m.Seq, rec.CapLen, rec.OrigLen, len(orig))
		}
		if want := base + int64(m.Seq)*1000; rec.Timestamp != want {
			t.Fatalf("seq %d: timestamp %d, want %d", m.Seq, rec.Timestamp, want)
		}
		u := header.UDP(rec.Data[np.L4Off:])
		if u.SrcPort() != origSport || u.DstPort() != roce.UDPPort || u.Checksum() != 0 {
			t.Fatalf("seq %d: UDP %d -> %d csum %#x not restored", m.Seq, u.SrcPort(), u.DstPort(), u.Checksum())
		}
		var ecn uint8
		if np.L3Proto == header.EtherTypeIPv4 {
			ecn = header.IPv4(rec.Data[np.L3Off:]).ECN()
		} else {
			ecn = header.IPv6(rec.Data[np.L3Off:]).ECN()
		}
		if (m.Event == mirror.EventECN) != (ecn == header.ECNCE) || m.Event != eventOf(m.Seq) {
			t.Fatalf("seq %d: event %v, ECN %d", m.Seq, m.Event, ecn)
		}
		if np.L3Proto == header.EtherTypeIPv4 && !header.IPv4(rec.Data[np.L3Off:]).ChecksumValid() {
			t.Fatalf("seq %d: IPv4 checksum", m.Seq)
		}
		if snap >= len(orig) {
			if err := roce.ParsePort(rec.Data, roce.UDPPort, &rp); err != nil {
				t.Fatal(err)
			}
			if err := rp.VerifyICRC(rec.Data); err != nil {
				t.Fatalf("seq %d: %v", m.Seq, err)
			}
		}
	}
	if count != fl.Packets {
		t.Fatalf("%s: %d records, result says %d", fl.Name, count, fl.Packets)
	}
}

// TestArenaFull: copies beyond num-pkts are counted, not stored, and the
// written file holds the first num-pkts; also on a port that fills the
// arena itself.
func TestArenaFull(t *testing.T) {
	t.Run("rx", func(t *testing.T) { arenaFull(t, false) })
	t.Run("slots", func(t *testing.T) { arenaFull(t, true) })
}

func arenaFull(t *testing.T, slots bool) {
	f, port := newFeeder(t, 1, 1024)
	if slots {
		port = newSlotPort(port)
	}
	d, err := New(Config{Port: port, NumPkts: 10, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	for s := uint64(1); s <= 25; s++ {
		f.send(0, buf[:mirrored(buf, s, 0)])
	}
	waitReceived(t, d, 25)
	if st := d.Status(); st.State != "capturing" || st.Captured != 10 || st.ArenaFull != 15 {
		t.Fatalf("status %+v", st)
	}
	res, err := d.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 10 || res.ArenaFull != 15 || res.Lost() != 15 {
		t.Fatalf("result %+v", res)
	}
	// A new capture starts empty.
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	f.send(0, buf[:mirrored(buf, 26, 0)])
	waitReceived(t, d, 1)
	if res, err = d.Stop(context.Background()); err != nil || res.Written != 1 || res.ArenaFull != 0 {
		t.Fatalf("second capture %+v %v", res, err)
	}
}

func TestConfigErrors(t *testing.T) {
	_, port := newFeeder(t, 2, 64)
	for name, c := range map[string]Config{
		"no port":       {},
		"snap":          {Port: port, SnapLen: 20},
		"num-pkts":      {Port: port, NumPkts: -1},
		"queue":         {Port: port, Queues: []int{2}},
		"dup queue":     {Port: port, Queues: []int{1, 1}},
		"cores":         {Port: port, Cores: []int{0}},
		"file with dir": {Port: port, File: "a/b.pcap"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCoreClaims: a dumper refuses a core another poller holds, and gives
// its cores back when it stops.
func TestCoreClaims(t *testing.T) {
	cores, err := dpdk.AllowedCores()
	if err != nil || len(cores) == 0 {
		t.Skip("no cores to pin to")
	}
	_, port := newFeeder(t, 1, 64)
	claims := dpdk.NewCoreClaims("")
	if err := claims.Claim(cores[0], "injector"); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Port: port, Cores: cores[:1], Claims: claims, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(); err == nil || !strings.Contains(err.Error(), "injector") {
		t.Fatalf("start on a claimed core: %v", err)
	}
	claims.Release(cores[0])
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	if o := claims.Owner(cores[0]); !strings.Contains(o, "dumper") {
		t.Fatalf("core owner %q", o)
	}
	if _, err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := claims.Owner(cores[0]); o != "" {
		t.Fatalf("core still owned by %q", o)
	}
}

// TestWriteError: an unwritable directory is an error naming the dumper.
func TestWriteError(t *testing.T) {
	_, port := newFeeder(t, 1, 64)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Name: "rm", Port: port, Dir: filepath.Join(file, "sub")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stop(context.Background()); err == nil || !strings.Contains(err.Error(), "dumper rm") {
		t.Fatalf("stop into a file: %v", err)
	}
}

// TestCaptureAllocs: the capture path allocates nothing.
func TestCaptureAllocs(t *testing.T) {
	w, pkts := captureBurst(t)
	if a := testing.AllocsPerRun(100, func() { w.capture(pkts) }); a != 0 {
		t.Fatalf("%v allocations per burst", a)
	}
}

// captureBurst is a worker with a 64 Ki-copy arena and a burst of 32
// mirrored WRITEs (314 bytes) to feed its capture path directly.
func captureBurst(tb testing.TB) (*worker, []*dpdk.Packet) {
	f, port := newFeeder(tb, 1, 64)
	d, err := New(Config{Port: port, NumPkts: 1 << 16, Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 2048)
	n := mirrored(buf, 1, 0)
	pkts := make([]*dpdk.Packet, 32)
	for i := range pkts {
		pkts[i] = f.pool.Get()
		pkts[i].CopyFrom(buf[:n])
	}
	return d.workers[0], pkts
}

func TestExtend48(t *testing.T) {
	const wrap = int64(1) << 48
	ref := int64(1_790_000_000_000_000_000)
	for _, d := range []int64{0, 1, -1, 5e9, -5e9, wrap/2 - 1, -(wrap/2 - 1)} {
		want := ref + d
		if got := extend48(want&(wrap-1), ref); got != want {
			t.Errorf("delta %d: got %d want %d", d, got, want)
		}
	}
}

// TestArenaResident: New faults in every page of a worker's arena and of
// its length arrays, so the capture path never takes a page fault on a
// fresh arena (the wire lengths, 4 bytes a copy, once had every other page
// left out).
func TestArenaResident(t *testing.T) {
	_, port := newFeeder(t, 1, 64)
	d, err := New(Config{Port: port, NumPkts: 1 << 18, SnapLen: 64, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w := d.workers[0]
	for _, a := range []struct {
		name string
		b    []byte
	}{
		{"arena", w.arena},
		{"lens", unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w.lens))), 2*len(w.lens))},
		{"wire", unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w.wire))), 4*len(w.wire))},
	} {
		// mincore takes page-aligned ranges: the whole pages inside the array.
		start := uintptr(unsafe.Pointer(unsafe.SliceData(a.b)))
		lo, hi := (start+4095)&^4095, (start+uintptr(len(a.b)))&^4095
		vec := make([]byte, (hi-lo)/4096)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, lo, hi-lo, uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
			t.Fatalf("mincore: %v", e)
		}
		for i, v := range vec {
			if v&1 == 0 {
				t.Fatalf("%s: page %d of %d not resident after New", a.name, i, len(vec))
			}
		}
	}
}
