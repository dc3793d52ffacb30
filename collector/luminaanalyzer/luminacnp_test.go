package luminaanalyzer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// TestLuminaCNPCheck counts by hand what Lumina's test_cnp expects of one
// trace: three connections, A1->B1, A1->B2 and A2->B1, so the port, the IP
// pairs and the data senders (the CNPs' destinations) group them three
// ways. ECN marks at 0, 10, 20 and 80 us (connections 0, 1, 2, 0) and a NAK
// of connection 1 at 81 us, with a 50 us interval:
//
//	per port:    marks at 0 and 80 (the NAK at 81 is within 50 us of 80)   2
//	per IP pair: A1->B1 0, 80; A1->B2 10, NAK 81 (71 us later); A2->B1 20   2 2 1
//	per sender:  A1 0, 80 (10 and 81 within 50 us); A2 20                  2 1
//
// The NAK counts only where the NIC sends a CNP with it (CX5/CX6 with
// slow restart); an E810 is checked with no interval and no CNP with a
// NAK, so every mark expects one. Each case's CNPs are what one pacing
// mode would send, and only the modes that agree with them pass.
func TestLuminaCNPCheck(t *testing.T) {
	a1, a2 := "10.0.0.1", "10.0.0.2"
	b2 := netip.MustParseAddr("10.0.1.2")
	build := func(nic NICConfig, cnps []int) *LuminaCNP {
		tr := newTrace(t, intent.VerbWrite, 3, a1, a1, a2)
		tr.m.Conns[1].ResponderIP = b2
		tr.m.ResponderNIC = nic
		tr.step = 0
		first := func(c int) uint32 { return tr.ipsn(c) }
		tr.data(0, first(0), first(0), mirror.EventECN)
		tr.after(10*time.Microsecond).data(1, first(1), first(1), mirror.EventECN)
		tr.after(10*time.Microsecond).data(2, first(2), first(2), mirror.EventECN)
		tr.after(60*time.Microsecond).data(0, first(0), first(0)+1, mirror.EventECN)
		tr.after(time.Microsecond).nak(1, first(1))
		for _, c := range cnps {
			tr.after(time.Microsecond).cnp(c, true)
		}
		// Packets that take no part: unmarked data and ACKs.
		tr.after(time.Microsecond).data(2, first(2), first(2)+1, 0)
		tr.ack(2, first(2)+1)
		path := tr.write(t.TempDir())
		l, err := LuminaCNPCheck(context.Background(), path, tr.m)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cx6 := NICConfig{Type: "CX6", DCQCNNPEnable: true, SlowRestart: true, MinTimeBetweenCNPs: int64(50 * time.Microsecond)}
	noSlow := cx6
	noSlow.SlowRestart = false
	e810 := NICConfig{Type: "E810", DCQCNNPEnable: true, SlowRestart: true, MinTimeBetweenCNPs: int64(50 * time.Microsecond)}
	for _, tc := range []struct {
		name     string
		nic      NICConfig
		cnps     []int // the connection each CNP answers
		expected [3][]int
		passing  []string
	}{
		{"per-port NIC", cx6, []int{0, 0}, [3][]int{{2}, {2, 2, 1}, {2, 1}}, []string{ScopePort}},
		{"per-IP-pair NIC", cx6, []int{0, 1, 2, 0, 1}, [3][]int{{2}, {2, 2, 1}, {2, 1}}, []string{ScopeIPPair}},
		{"per-destination-IP NIC", cx6, []int{0, 2, 0}, [3][]int{{2}, {2, 2, 1}, {2, 1}}, []string{ScopeDestIP}},
		{"no CNP with a NAK", noSlow, []int{0, 1, 2, 0}, [3][]int{{2}, {2, 1, 1}, {2, 1}}, []string{ScopeIPPair}},
		{"E810: every mark", e810, []int{0, 1, 2, 0}, [3][]int{{4}, {2, 1, 1}, {3, 1}}, []string{ScopePort, ScopeIPPair, ScopeDestIP}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := build(tc.nic, tc.cnps)
			t.Log(l)
			for i, m := range l.Modes {
				var exp []int
				for _, g := range m.Groups {
					exp = append(exp, g.Expected)
				}
				if !slices.Equal(exp, tc.expected[i]) {
					t.Errorf("%s: expected %v, want %v (%+v)", m.Mode, exp, tc.expected[i], m.Groups)
				}
			}
			if got := l.Passing(); !slices.Equal(got, tc.passing) {
				t.Errorf("passing %v, want %v: %s", got, tc.passing, l)
			}
			if g := l.Mode(ScopeIPPair).Groups; g[0].ECNs != 2 || g[1].NACKs != 1 || g[1].Key != "10.0.0.1->10.0.1.2" {
				t.Errorf("IP pair groups %+v", g)
			}
		})
	}
	// send_read is refused: its QPs have different receivers.
	tr := newTrace(t, intent.VerbSendRead, 1)
	if _, err := LuminaCNPCheck(context.Background(), tr.write(t.TempDir()), tr.m); err == nil {
		t.Error("send_read accepted")
	}
}

// FuzzLuminaCNP feeds arbitrary records to Lumina's CNP check: nothing
// panics, and the modes count the same packets: the port's group holds
// every mark, NAK and CNP the IP pairs' and the senders' groups hold, and
// no group expects more CNPs than it had triggers.
func FuzzLuminaCNP(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte{})
	m := fuzzMeta(f)
	m.ResponderNIC = NICConfig{Type: "CX6", DCQCNNPEnable: true, SlowRestart: true, MinTimeBetweenCNPs: 20_000}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := newLuminaCNPCheck(m)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for len(data) >= 6 {
			l := min(int(binary.BigEndian.Uint16(data[:2])), len(data)-6)
			c.packet(data[6 : 6+l])
			data = data[6+l:]
			n++
		}
		l := c.result()
		if len(l.Modes) != 3 {
			t.Fatalf("%d modes", len(l.Modes))
		}
		var sums [3]LuminaCNPGroup
		for i, md := range l.Modes {
			for _, g := range md.Groups {
				if g.Expected > g.ECNs+g.NACKs || g.Expected < 0 {
					t.Fatalf("%s %s: %+v", md.Mode, g.Key, g)
				}
				sums[i].ECNs += g.ECNs
				sums[i].NACKs += g.NACKs
				sums[i].CNPs += g.CNPs
			}
		}
		if sums[0] != sums[1] || sums[0] != sums[2] || sums[0].ECNs+sums[0].NACKs+sums[0].CNPs > n {
			t.Fatalf("modes count differently for %d records: %+v", n, sums)
		}
		if _, err := json.Marshal(l); err != nil {
			t.Fatal(err)
		}
		_ = l.String()
	})
}
