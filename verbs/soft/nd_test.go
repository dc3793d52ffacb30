package soft

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

// TestRCOverIPv6ND connects RC QPs on IPv6 GIDs with no static neighbours:
// each side resolves the other with a neighbour solicitation, answered by an
// advertisement, and the WRITE lands.
func TestRCOverIPv6ND(t *testing.T) {
	ca := Config{GIDs: []netip.Addr{netip.MustParseAddr("fd00::a:1")}}
	cb := Config{GIDs: []netip.Addr{netip.MustParseAddr("fd00::b:2")}}
	p := newPair(t, ca, cb, nil)
	x := newEnd(t, p.a, verbs.QPTypeRC, 1<<16, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, 1<<16, false)
	connect(t, x, y, defaultRC())
	fill(x.buf[:8000], 5)
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 8000)}))
	if wc := waitWC(t, x.scq, 1, 5*time.Second)[0]; wc.Status != verbs.WCSuccess {
		t.Fatalf("wc %+v", wc)
	}
	if !bytes.Equal(x.buf[:8000], y.buf[:8000]) {
		t.Fatal("data differs")
	}
	if p.a.Counter(CntNDSolicitsSent) == 0 || p.b.Counter(CntNDAdvertsSent) == 0 {
		t.Fatalf("neighbour discovery not used: %v / %v", p.a.Counters(), p.b.Counters())
	}
	if p.a.Counter(CntARPRequestsSent) != 0 {
		t.Fatal("ARP used for an IPv6 neighbour")
	}
}

// TestIPv6NDFails: an IPv6 neighbour nobody answers for fails the request
// after the retries, as ARP does for IPv4.
func TestIPv6NDFails(t *testing.T) {
	prof := ProfileCX5
	prof.ARPInterval, prof.ARPRetries = time.Millisecond, 3
	ca := Config{GIDs: []netip.Addr{netip.MustParseAddr("fd00::a:1")}, Profile: prof}
	p := newPair(t, ca, Config{GIDs: []netip.Addr{netip.MustParseAddr("fd00::b:2")}}, nil)
	x := newEnd(t, p.a, verbs.QPTypeUD, 4096, false)
	x.udUp(t)
	ah, err := x.pd.CreateAH(verbs.AHAttr{DGID: verbs.GIDFromAddr(netip.MustParseAddr("fd00::dead"))})
	must(t, err)
	must(t, x.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 8, LKey: x.mr.LKey()}}, AH: ah, RemoteQPN: 0x123, RemoteQKey: testQKey}}))
	if wc := waitWC(t, x.scq, 1, 5*time.Second)[0]; wc.Status != verbs.WCRetryExcErr {
		t.Fatalf("wc %+v", wc)
	}
	if n := p.a.Counter(CntNDSolicitsSent); n != 3 {
		t.Fatalf("nd_solicits_sent %d, want 3", n)
	}
}
