package dtacollector

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

// The exchange played by hostile peers: each test fails on a collector
// that hands its memory to whoever asks.

var testKey = []byte("0123456789abcdef0123456789abcdef")

func withKey(s *Spec) { s.Key = testKey }

func hello(name string, ip netip.Addr, qpn uint32) dtamem.Hello {
	return dtamem.Hello{Name: name, IP: ip, MAC: "02:00:00:00:00:09", QPN: qpn, PSN: 1}
}

func dialKey(t *testing.T, b *bed, h dtamem.Hello, key []byte) (net.Conn, *dtamem.Offer, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, o, err := dtamem.Dial(ctx, b.addr, h, key)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, o, err
}

// noAccess checks that the refused peers got no QP, no neighbour entry.
func noAccess(t *testing.T, b *bed, refused uint64) {
	t.Helper()
	if st := b.c.Stats(); st.Connections != 0 || st.Connects != 0 || st.Refused != refused {
		t.Fatalf("stats %+v, want %d refused and no connection", st, refused)
	}
	if n := b.nd.list(); len(n) != 0 {
		t.Fatalf("neighbour entries added for refused peers: %v", n)
	}
}

// TestUnauthenticated: a collector with a key gives a peer that does not
// prove it holds it no QP, no keys and no neighbour entry: a plain
// Hello, a wrong key, no key, a forged answer to the challenge.
func TestUnauthenticated(t *testing.T) {
	b := newBedWith(t, allSpec, Options{}, withKey)

	// A plain client of the old exchange gets a challenge, whose error
	// says why, and nothing else.
	tc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if err := dtamem.WriteMsg(tc, hello("old", transIP, 5)); err != nil {
		t.Fatal(err)
	}
	r := dtamem.NewMsgReader(tc)
	var o dtamem.Offer
	if err := dtamem.ReadMsg(r, &o); err != nil {
		t.Fatal(err)
	}
	if o.Challenge != "" || o.QPN != 0 || o.Regions.KeyWrite != nil || !strings.Contains(o.Error, "no nonce") {
		t.Fatalf("a Hello without a nonce got %+v", o)
	}

	// A nonce, then a forged answer.
	tc2, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc2.Close()
	h := hello("forger", transIP, 6)
	h.Nonce = strings.Repeat("ab", 32)
	if err := dtamem.WriteMsg(tc2, h); err != nil {
		t.Fatal(err)
	}
	r2 := bufio.NewReader(tc2)
	if err := dtamem.ReadMsg(r2, &o); err != nil || o.Challenge == "" || o.QPN != 0 {
		t.Fatalf("challenge %+v %v", o, err)
	}
	if err := dtamem.WriteMsg(tc2, map[string]string{"auth": strings.Repeat("00", 32)}); err != nil {
		t.Fatal(err)
	}
	o = dtamem.Offer{}
	if err := dtamem.ReadMsg(r2, &o); err != nil || o.QPN != 0 || o.Regions.KeyWrite != nil || !strings.Contains(o.Error, "does not hold the key") {
		t.Fatalf("forged answer got %+v %v", o, err)
	}

	if _, _, err := dialKey(t, b, hello("wrong", transIP, 7), []byte("not the key, not the key")); !errors.Is(err, dtamem.ErrAuth) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, _, err := dialKey(t, b, hello("none", transIP, 8), nil); !errors.Is(err, dtamem.ErrAuth) || !strings.Contains(err.Error(), "key-file") {
		t.Fatalf("no key: %v", err)
	}
	noAccess(t, b, 4)
	if st := b.c.Stats(); st.AuthFailed != 4 {
		t.Fatalf("auth failures %d", st.AuthFailed)
	}

	// The translator with the key works as before.
	x := b.dial(0x11, 100)
	x.send(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 1, Data: binary.BigEndian.AppendUint32(nil, 11)})
	x.settle()
	if got, err := b.c.KeyWrite(1, 2); err != nil || got.Value != 11 {
		t.Fatalf("authenticated translator's write: %+v %v", got, err)
	}
}

// TestRogueCollector: a translator with a key writes only into a
// collector that proves it holds the key; one without a key refuses to
// speak to a collector that wants one.
func TestRogueCollector(t *testing.T) {
	open := newBed(t, allSpec, Options{})
	if _, _, err := dialKey(t, open, hello("t0", transIP, 5), testKey); !errors.Is(err, dtamem.ErrAuth) || !strings.Contains(err.Error(), "did not ask") {
		t.Fatalf("a collector without the key: %v", err)
	}
	other := newBedWith(t, allSpec, Options{}, func(s *Spec) { s.Key = []byte("another key entirely....") })
	if _, _, err := dialKey(t, other, hello("t0", transIP, 5), testKey); !errors.Is(err, dtamem.ErrAuth) {
		t.Fatalf("a collector with another key: %v", err)
	}
}

// TestNeighbourBinding: a connected translator's address and name are
// its own: another translator claiming them is refused and does not
// overwrite its neighbour entry.
func TestNeighbourBinding(t *testing.T) {
	b := newBedWith(t, allSpec, Options{}, withKey)
	b.dial(0x11, 100) // trans0 at transIP
	if _, _, err := dialKey(t, b, hello("intruder", transIP, 0x12), testKey); err == nil || !strings.Contains(err.Error(), `belongs to translator "trans0"`) {
		t.Fatalf("another translator on trans0's address: %v", err)
	}
	if _, _, err := dialKey(t, b, hello("trans0", netip.MustParseAddr("10.9.0.7"), 0x13), testKey); err == nil || !strings.Contains(err.Error(), "already connected") {
		t.Fatalf("trans0 twice: %v", err)
	}
	if n := b.nd.list(); len(n) != 1 || n[0] != transIP {
		t.Fatalf("neighbour entries %v, want trans0's only", n)
	}
	// Bad fields never reach the tables.
	for _, h := range []dtamem.Hello{
		{Name: "bcast", IP: netip.MustParseAddr("255.255.255.255"), MAC: "02:00:00:00:00:01", QPN: 5},
		{Name: "mcast", IP: netip.MustParseAddr("10.9.0.8"), MAC: "01:00:5e:00:00:01", QPN: 5},
		{Name: "bad name\n", IP: netip.MustParseAddr("10.9.0.8"), MAC: "02:00:00:00:00:01", QPN: 5},
		{Name: "psn", IP: netip.MustParseAddr("10.9.0.8"), MAC: "02:00:00:00:00:01", QPN: 5, PSN: 1 << 24},
	} {
		// Sent raw: Dial would refuse them itself.
		got := rawHello(t, b, h)
		if got.QPN != 0 || got.Error == "" {
			t.Fatalf("hello %+v got %+v", h, got)
		}
	}
	if n := b.nd.list(); len(n) != 1 {
		t.Fatalf("neighbour entries %v", n)
	}
}

// rawHello authenticates h (which Dial would refuse to send) and returns
// the collector's answer.
func rawHello(t *testing.T, b *bed, h dtamem.Hello) dtamem.Offer {
	t.Helper()
	tc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	// Dial's exchange with validation skipped: marshal by hand.
	h.Nonce = strings.Repeat("cd", 32)
	line, _ := json.Marshal(h)
	if _, err := tc.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(tc)
	var o dtamem.Offer
	if err := dtamem.ReadMsg(r, &o); err != nil {
		t.Fatal(err)
	}
	if o.Challenge == "" {
		return o
	}
	if err := dtamem.WriteMsg(tc, map[string]string{"auth": dtamem.AuthFor(testKey, o.Challenge, h.Nonce, append(line, '\n'))}); err != nil {
		t.Fatal(err)
	}
	o = dtamem.Offer{}
	if err := dtamem.ReadMsg(r, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestAdmission: the allow-list pins names to addresses, and
// max-translators bounds the QPs.
func TestAdmission(t *testing.T) {
	b := newBedWith(t, allSpec+"max-translators: 1\ntranslators: [{name: trans0, ip: 10.9.0.100}, {name: t2, ip: 10.9.0.2}]\n", Options{}, withKey)
	if _, _, err := dialKey(t, b, hello("stranger", netip.MustParseAddr("10.9.0.3"), 5), testKey); err == nil || !strings.Contains(err.Error(), "not in the collector's translators") {
		t.Fatalf("a translator not on the list: %v", err)
	}
	if _, _, err := dialKey(t, b, hello("t2", netip.MustParseAddr("10.9.0.3"), 5), testKey); err == nil || !strings.Contains(err.Error(), "must connect from 10.9.0.2") {
		t.Fatalf("t2 from another address: %v", err)
	}
	b.dial(0x11, 100)
	if _, _, err := dialKey(t, b, hello("t2", netip.MustParseAddr("10.9.0.2"), 5), testKey); err == nil || !strings.Contains(err.Error(), "max-translators") {
		t.Fatalf("over max-translators: %v", err)
	}
	if st := b.c.Stats(); st.Connections != 1 || st.Refused != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRevokedKeys: a translator's keys are its own registrations and go
// with its connection: a WRITE with a gone translator's rkey completes in
// error (a NAK) at the collector, and the memory is untouched.
func TestRevokedKeys(t *testing.T) {
	b := newBedWith(t, allSpec, Options{}, withKey)
	x := b.dial(0x11, 100)
	old := x.offer.Regions
	if old.KeyWrite.RKey == b.c.Regions().KeyWrite.RKey {
		t.Fatal("the translator got the collector's own key")
	}
	x.tcp.Close()
	waitFor(t, "the connection to go", func() bool { return len(b.c.Connections()) == 0 })
	y := b.dial(0x22, 5000)
	if y.offer.Regions.KeyWrite.RKey == old.KeyWrite.RKey {
		t.Fatal("the new connection got the old key")
	}
	stale, err := dtatranslator.NewTranslator(y.conn, old)
	if err != nil {
		t.Fatal(err)
	}
	y.tr = stale
	if err := y.tr.Translate(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 3, Data: binary.BigEndian.AppendUint32(nil, 33)}, y.emit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the NAK", func() bool { y.answers(); return y.conn.Stats.NAKs > 0 })
	if got, err := b.c.KeyWrite(3, 2); err == nil && got.Value == 33 {
		t.Fatalf("the stale key wrote: %+v", got)
	}
}

// TestSilentAndOversized: a Hello over MaxHelloLen is cut off with a
// clear error; silent peers hold at most maxPending exchanges, and the
// collector still serves a translator once they are gone.
func TestSilentAndOversized(t *testing.T) {
	b := newBedWith(t, allSpec, Options{}, withKey)
	tc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	go tc.Write([]byte(strings.Repeat("x", 2*dtamem.MaxHelloLen)))
	// The collector closes without an offer.
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := tc.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("oversized hello: read %d %v", n, err)
	}
	var silent []net.Conn
	for range maxPending {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	waitFor(t, "the silent peers to be pending", func() bool { return b.c.pending.Load() == maxPending })
	extra, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("a peer over the pending limit: read %d %v", n, err)
	}
	extra.Close()
	for _, c := range silent {
		c.Close()
	}
	waitFor(t, "the silent peers to go", func() bool { return b.c.pending.Load() == 0 })
	b.dial(0x11, 100)
}
