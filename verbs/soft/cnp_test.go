package soft

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestCNPPacingScope reproduces Lumina's CNP experiment: three requester
// QPs (two sharing a source IP) write to one responder through a link that
// marks every data packet CE. With a pacing interval longer than the test,
// the responder sends one CNP per scope key: one per port, one per
// destination IP, or one per QP.
func TestCNPPacingScope(t *testing.T) {
	cases := []struct {
		scope    CNPScope
		interval time.Duration
		want     uint64
	}{
		{CNPPerPort, time.Hour, 1},
		{CNPPerDestIP, time.Hour, 2},
		{CNPPerQP, time.Hour, 3},
		{CNPPerPort, 0, 12}, // no pacing: one per marked packet
	}
	for _, c := range cases {
		t.Run(c.scope.String()+"/"+c.interval.String(), func(t *testing.T) {
			prof := ProfileCX5
			prof.CNPScope, prof.MinTimeBetweenCNPs = c.scope, c.interval
			var lp *lossyPort
			wrap := func(side int, pt dpdk.Port) dpdk.Port {
				if side == 0 {
					lp = &lossyPort{Port: pt}
					return lp
				}
				return pt
			}
			ca := Config{GIDs: []netip.Addr{netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("10.0.0.12")}}
			cb := Config{GIDs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Profile: prof}
			p := newPair(t, ca, cb, wrap)
			lp.setDecide(func(i int, pk *roce.Packet, _ []byte) fate {
				if pk.Opcode.Transport() == roce.TransportRC && !opIsResponse(pk.Opcode) {
					return markCE
				}
				return pass
			})
			var xs []*end
			for i := 0; i < 3; i++ {
				x := newEnd(t, p.a, verbs.QPTypeRC, 1<<16, false)
				y := newEnd(t, p.b, verbs.QPTypeRC, 1<<16, false)
				x.gidx = min(i, 1)
				prm := defaultRC()
				prm.timeout = 14 // a spurious retransmission would add marked packets
				connect(t, x, y, prm)
				must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 4096)}))
				xs = append(xs, x)
			}
			for _, x := range xs {
				if wc := waitWC(t, x.scq, 1, 2*time.Second)[0]; wc.Status != verbs.WCSuccess {
					t.Fatalf("wc %+v", wc)
				}
			}
			if n := p.b.Counter(CntNpECNMarkedRocePackets); n != 12 {
				t.Fatalf("np_ecn_marked_roce_packets %d, want 12", n)
			}
			if n := p.b.Counter(CntNpCnpSent); n != c.want {
				t.Fatalf("np_cnp_sent %d, want %d", n, c.want)
			}
			deadline := time.Now().Add(2 * time.Second)
			for p.a.Counter(CntRpCnpIgnored) != c.want {
				if time.Now().After(deadline) {
					t.Fatalf("rp_cnp_ignored %d, want %d", p.a.Counter(CntRpCnpIgnored), c.want)
				}
				time.Sleep(time.Millisecond)
			}
			if p.a.Counter(CntRpCnpHandled) != 0 {
				t.Fatal("CNPs handled with DCQCN off")
			}
		})
	}
}

// TestNAKTriggersCNP checks the profile switch that makes a NAK sequence
// error come with a CNP (CX5/CX6) or not (CX4).
func TestNAKTriggersCNP(t *testing.T) {
	for _, prof := range []Profile{ProfileCX4, ProfileCX5} {
		t.Run(prof.Name, func(t *testing.T) {
			prof.NAKReactionDelay = 0
			prof.DCQCNRate = true
			prm := defaultRC()
			prm.timeout = 14
			p, x, y, ports := lossyPair(t, prm, Config{Profile: prof}, Config{Profile: prof})
			dropped := false
			ports[0].setDecide(func(i int, pk *roce.Packet, _ []byte) fate {
				if !dropped && pk.Opcode == roce.RCWriteMiddle {
					dropped = true
					return drop
				}
				return pass
			})
			must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 8192)}))
			if wc := waitWC(t, x.scq, 1, 2*time.Second)[0]; wc.Status != verbs.WCSuccess {
				t.Fatalf("wc %+v", wc)
			}
			want := uint64(0)
			if prof.NAKTriggersCNP {
				want = 1
			}
			if n := p.b.Counter(CntNpCnpSent); n != want {
				t.Fatalf("np_cnp_sent %d, want %d", n, want)
			}
			if p.b.Counter(CntNpECNMarkedRocePackets) != 0 {
				t.Fatal("ECN marks counted without marking")
			}
			deadline := time.Now().Add(time.Second)
			for p.a.Counter(CntRpCnpHandled) != want {
				if time.Now().After(deadline) {
					t.Fatalf("rp_cnp_handled %d, want %d", p.a.Counter(CntRpCnpHandled), want)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// TestProfiles checks the presets differ where Lumina saw them differ.
func TestProfiles(t *testing.T) {
	if ProfileCX6.CNPScope != CNPPerPort || ProfileCX5.CNPScope != CNPPerDestIP || ProfileCX4.CNPScope != CNPPerDestIP {
		t.Fatal("CNP scopes")
	}
	if ProfileCX4.NAKReactionDelay <= ProfileCX5.NAKReactionDelay {
		t.Fatal("CX4 reacts to NAKs in firmware, slower than CX5")
	}
	if p, err := ProfileByName("cx6"); err != nil || p.Name != "cx6" {
		t.Fatal(p, err)
	}
	if _, err := ProfileByName("cx9"); err == nil {
		t.Fatal("unknown profile accepted")
	}
	if (Profile{}).withDefaults().Name != "cx5" {
		t.Fatal("zero profile is not cx5")
	}
}
