package dtamem

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/netip"
	"strings"
	"testing"
)

var fuzzKey = []byte("fuzz key 0123456789abcdef")

// FuzzAccept plays a hostile peer against the collector's half of the
// exchange: whatever it sends, Accept does not panic, reads no more than
// MaxHelloLen a line, and never takes a peer without the key for an
// authenticated one; a Hello it returns without error validates or is
// refused by Validate, never panics it.
func FuzzAccept(f *testing.F) {
	h := Hello{Name: "t0", IP: netip.MustParseAddr("10.0.0.1"), MAC: "02:00:00:00:00:01", QPN: 5, PSN: 7,
		Nonce: strings.Repeat("ab", nonceLen)}
	line, _ := json.Marshal(h)
	f.Add(append(line, '\n'), false)
	f.Add(append(append(line, '\n'), `{"auth":"00"}`+"\n"...), true)
	f.Add([]byte(`{"name":"x","ip":"::1","mac":"ff:ff:ff:ff:ff:ff","qpn":16777216}`+"\n"), false)
	f.Add([]byte(strings.Repeat("{", 5000)), true)
	f.Fuzz(func(t *testing.T, data []byte, keyed bool) {
		var key []byte
		if keyed {
			key = fuzzKey
		}
		r := bufio.NewReaderSize(bytes.NewReader(data), MaxHelloLen)
		a, err := Accept(r, io.Discard, "c0", key)
		if a == nil {
			return
		}
		if err == nil && keyed && a.Authenticated {
			t.Fatalf("a peer without the key authenticated: %q", data)
		}
		if err == nil {
			_ = a.Hello.Validate()
			_ = a.Offer(io.Discard, &Offer{Name: "c0"})
		}
	})
}

// fakeConn is the collector's side of an exchange played from bytes.
type fakeConn struct {
	io.Reader
	w bytes.Buffer
}

func (c *fakeConn) Write(b []byte) (int, error) { return c.w.Write(b) }

// FuzzOffer plays a hostile collector against the translator's half: a
// keyed translator takes no offer whose proof it did not check, and an
// offer it takes has regions and an endpoint that check or fail cleanly.
func FuzzOffer(f *testing.F) {
	o := Offer{Name: "c0", IP: netip.MustParseAddr("10.0.0.2"), MAC: "02:00:00:00:00:02", QPN: 9, MTU: 1024,
		Regions: Regions{KeyWrite: &KeyWriteRegion{Addr: 4096, RKey: 7, Slots: 1024, DataWidth: 4}}}
	line, _ := json.Marshal(o)
	f.Add(append(line, '\n'), false)
	ch, _ := json.Marshal(Offer{Name: "c0", Challenge: strings.Repeat("cd", nonceLen)})
	f.Add(append(append(ch, '\n'), append(line, []byte("\n{\"proof\":\"00\"}\n")...)...), true)
	f.Add([]byte(`{"error":"no"}`+"\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, keyed bool) {
		var key, nt []byte
		h := Hello{Name: "t0", IP: netip.MustParseAddr("10.0.0.1"), MAC: "02:00:00:00:00:01", QPN: 5}
		if keyed {
			key, nt = fuzzKey, newNonce()
			h.Nonce = hex.EncodeToString(nt)
		}
		got, err := exchange(&fakeConn{Reader: bytes.NewReader(data)}, h, key, nt)
		if err != nil || got == nil {
			return
		}
		if keyed && got.Error == "" {
			t.Fatalf("a keyed translator took an unproven offer: %q", data)
		}
		_ = got.Regions.Validate()
		_, _ = got.Endpoint()
		_ = got.Regions.MaxWrite()
	})
}
