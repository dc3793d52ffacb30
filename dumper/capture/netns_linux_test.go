//go:build linux

package capture

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/filter"
	"github.com/rdma-appliance/appliance/dpdk/netns"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestSessionAFPacket captures on a veth end in a network namespace with
// two fanout queues: the filters run in the kernel (VLAN-tagged frames
// included, their tags written back), and the file holds exactly the
// frames the same filters accept in user space, which tshark reads.
func TestSessionAFPacket(t *testing.T) {
	pair, send := vethSender(t, "cpt")
	var frames [][]byte
	for i := uint32(0); i < 600; i++ {
		s := frameSpec{op: roce.RCWriteOnly, qpn: 16 + i%4, psn: i, seq: i, vlan: i%3 == 0, ecn: uint8(i % 4)}
		switch i % 10 {
		case 7:
			s.src, s.dst = "fe80::1", "fe80::2"
		case 9:
			s.port = 9741 // not RoCE's port
		case 5:
			s.op, s.psn = roce.OpCNP, 0
		}
		frames = append(frames, buildFrame(t, s))
	}
	for _, c := range []struct{ filter, roce string }{
		{"udp", "qpn 17 or cnp"},
		{"vlan 100 and udp dst port 4791", ""},
		// (The first vlan keyword moves the offsets of what follows it, as
		// in libpcap, so it goes last.)
		{"(ip6 or udp[8] = 0x81) and not vlan", "not qpn 18"},
	} {
		t.Run(c.filter+"|"+c.roce, func(t *testing.T) {
			prog, err := filter.Compile(c.filter, filter.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rf, err := ParseRoCE(c.roce, 0)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			var p roce.Packet
			for _, f := range frames {
				if prog.Match(f, len(f)) != 0 && (c.roce == "" || rf.Match(f, &p)) {
					want = append(want, string(f))
				}
			}
			if len(want) == 0 {
				t.Fatal("the filters keep no frame")
			}
			path := filepath.Join(t.TempDir(), "cap.pcapng")
			var s *Session
			err = netns.Do(pair.NSB, func() (err error) {
				s, err = New(Config{Port: "afpacket:" + pair.IfB + ",timeout=10ms", Queues: 2, Filter: c.filter, RoCE: c.roce,
					Count: uint64(len(want)), Output: Output{Path: path, Format: pcap.FormatPcapNG}})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := runUntil(t, s, func() { send(frames) })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped by %s after %v: %+v", res.Stopped, res.Stats.Elapsed, res.Stats)
			if !res.Kernel || res.Stats.Filtered != 0 {
				t.Errorf("kernel filter %v, %d filtered in user space", res.Kernel, res.Stats.Filtered)
			}
			got := readFrames(t, path)
			sort.Strings(got)
			sort.Strings(want)
			if len(got) != len(want) {
				t.Fatalf("%d frames written, want %d (%+v)", len(got), len(want), res.Stats)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("frame %d differs:\n% x\nwant\n% x", i, got[i], want[i])
				}
			}
			tsharkClean(t, path)
		})
	}
}

// TestRecordsPath captures the same frames twice at once on one veth end:
// by the records path (no count) and by the general path (a count never
// reached), with files rotated every few hundred records, untagged and
// tagged, RoCE and other frames, a RoCE filter or none. The files must hold
// the same records at the same rotation points, and the per-QP counters
// must agree.
func TestRecordsPath(t *testing.T) {
	pair, send := vethSender(t, "crp")
	var frames [][]byte
	for i := uint32(0); i < 1500; i++ {
		s := frameSpec{op: roce.RCWriteOnly, qpn: 16 + i%5, psn: i / 2 % 97, seq: i, vlan: i%7 == 0, ecn: uint8(i % 4), badICRC: i%13 == 0}
		switch i % 11 {
		case 3:
			s.src, s.dst = "fe80::1", "fe80::2"
		case 6:
			s.port = 9741 // not RoCE's port
		case 8:
			s.op, s.psn = roce.OpCNP, 0
		case 9:
			s.op, s.syndrome = roce.RCAck, roce.Syndrome(0x60) // a NAK
		}
		frames = append(frames, buildFrame(t, s))
	}
	// (icrc-bad is the one predicate the kernel cannot test: user space
	// rejects frames there.) The records path counts per QP as it writes
	// when a RoCE filter runs, from the bytes the record keeps: a snap
	// length that cuts the frames must count as the general path does
	// (at 80 bytes the IPv6 frames lose their RETH and fail the filter).
	for _, c := range []struct {
		expr string
		snap int
	}{{"", 128}, {"not qpn 18", 128}, {"qpn 16-18 and not icrc-bad", 128}, {"not qpn 18", 80}} {
		expr := c.expr
		t.Run(fmt.Sprintf("roce=%s/snap=%d", expr, c.snap), func(t *testing.T) {
			rf, err := ParseRoCE(expr, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := uint64(0)
			var p roce.Packet
			for _, f := range frames {
				if expr == "" || rf.Match(ringView(f, c.snap), &p) {
					want++
				}
			}
			dir := t.TempDir()
			var fast, general *Session
			err = netns.Do(pair.NSB, func() (err error) {
				cfg := func(name string, count uint64) Config {
					return Config{Port: "afpacket:" + pair.IfB + ",timeout=10ms,blocksize=64K,blocks=64", RoCE: expr, Count: count,
						SnapLen: c.snap, Output: Output{Path: filepath.Join(dir, name+".pcapng"), Format: pcap.FormatPcapNG, FileSize: 20000}}
				}
				if fast, err = New(cfg("fast", 0)); err != nil {
					return err
				}
				general, err = New(cfg("general", 1<<40))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			type ret struct {
				r   *Result
				err error
			}
			done := make(chan ret, 2)
			for _, s := range []*Session{fast, general} {
				go func() {
					r, err := s.Run(ctx, nil)
					done <- ret{r, err}
				}()
				<-s.Running()
			}
			if !fast.workers0Fast() || general.workers0Fast() {
				t.Fatal("the sessions do not take the paths under test")
			}
			send(frames)
			for fast.Stats().Written < want || general.Stats().Written < want {
				if ctx.Err() != nil {
					t.Fatalf("written %d and %d of %d", fast.Stats().Written, general.Stats().Written, want)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			res := map[*Session]*Result{}
			for range 2 {
				r := <-done
				if r.err != nil {
					t.Fatal(r.err)
				}
				if r.r.Port == "" {
					t.Fatal("no result")
				}
			}
			res[fast], res[general] = fast.result(), general.result()
			a, b := res[fast], res[general]
			if a.Stats.Written != want || b.Stats.Written != want || a.Stats.RoCERejected != b.Stats.RoCERejected ||
				(strings.Contains(expr, "icrc") || c.snap < 90) != (a.Stats.RoCERejected > 0) {
				t.Fatalf("records path %+v, general path %+v, want %d written", a.Stats, b.Stats, want)
			}
			if len(a.Files) < 3 || len(a.Files) != len(b.Files) {
				t.Fatalf("%d files by the records path, %d by the general path (want the same, at least 3)", len(a.Files), len(b.Files))
			}
			for i := range a.Files {
				fa, fb := readFrames(t, a.Files[i].Path), readFrames(t, b.Files[i].Path)
				if len(fa) != len(fb) || uint64(len(fa)) != a.Files[i].Packets {
					t.Fatalf("file %d: %d records by the records path (%d counted), %d by the general path", i, len(fa), a.Files[i].Packets, len(fb))
				}
				for j := range fa {
					if fa[j] != fb[j] {
						t.Fatalf("file %d record %d differs:\n% x\n% x", i, j, fa[j], fb[j])
					}
				}
			}
			tsharkClean(t, a.Files[0].Path, a.Files[len(a.Files)-1].Path)
			if fmt.Sprint(a.QPs) != fmt.Sprint(b.QPs) || len(a.QPs) == 0 {
				t.Fatalf("per-QP counters differ:\n%+v\n%+v", a.QPs, b.QPs)
			}
			t.Logf("%d frames written in %d files; QPs %+v", want, len(a.Files), a.QPs)
		})
	}
}

// ringView is frame f as an AF_PACKET ring with snap length snap shows
// it: without its VLAN tag (which the kernel hands over beside the frame),
// cut at snap.
func ringView(f []byte, snap int) []byte {
	if binary.BigEndian.Uint16(f[12:]) == 0x8100 {
		f = append(f[:12:12], f[16:]...)
	}
	return f[:min(len(f), snap)]
}

// workers0Fast says whether the session's first worker takes the records
// path.
func (s *Session) workers0Fast() bool { return len(s.workers) > 0 && s.workers[0].fast }

// vethSender is a veth pair between two fresh namespaces and what sends
// frames from its first end (an AF_PACKET port), paced for the veth's
// backlog; all closed at the end of the test.
func vethSender(t *testing.T, name string) (*netns.Pair, func(frames [][]byte)) {
	t.Helper()
	pair := netns.TestPair(t, name, 0)
	pool, err := dpdk.NewPool(name+"-tx", 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	tx, err := netns.OpenPort(pair.NSA, "afpacket:"+pair.IfA, dpdk.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Close() })
	return pair, func(frames [][]byte) {
		for i, f := range frames {
			pk := pool.Get()
			pk.CopyFrom(f)
			for tx.TxBurst(0, []*dpdk.Packet{pk}) == 0 {
				time.Sleep(time.Millisecond)
			}
			if i%64 == 63 {
				time.Sleep(time.Millisecond) // the veth backlog is 1000 frames
			}
		}
	}
}
