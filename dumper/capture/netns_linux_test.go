//go:build linux

package capture

import (
	"path/filepath"
	"sort"
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
	pair := netns.TestPair(t, "cpt", 0)
	pool, err := dpdk.NewPool("cpt-tx", 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := netns.OpenPort(pair.NSA, "afpacket:"+pair.IfA, dpdk.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
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
			res, err := runUntil(t, s, func() {
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
			})
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

func readFrames(t *testing.T, path string) []string {
	t.Helper()
	r, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	var rec pcap.Record
	for r.Next(&rec) == nil {
		out = append(out, string(rec.Data))
	}
	return out
}
