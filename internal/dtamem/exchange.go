package dtamem

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Connection setup between a translator and a collector, like RDMA-CM's
// exchange but over a plain TCP connection (the Tofino translator's
// control plane does the same over gRPC): the translator sends a Hello
// with the address and QP it sends from and its first PSN; the collector
// creates an RC QP for it, moves it to RTR expecting that PSN, and
// answers with an Offer: its own address and QP and the regions it
// serves (address, length, rkey per primitive). Each message is one JSON
// object on a line. The TCP connection stays open for the connection's
// life: when it drops, the collector destroys the QP and the translator
// sets up again (a collector restart).
//
// The offer hands out remote write access to the collector's memory, so
// a collector with a key (a secret shared with its translators, read
// from a file, never sent) first makes the translator prove it holds
// it: the Hello carries a translator nonce, the collector answers with a
// challenge (a nonce of its own), the translator sends an HMAC-SHA256 of
// both nonces and the Hello's exact bytes, and only then does the
// collector create a QP and send the offer, followed by its own HMAC
// over the nonces, the Hello and the offer's exact bytes. A replayed
// Hello meets a fresh challenge; a collector without the key cannot make
// a translator write telemetry into it. The exchange is not encrypted:
// someone on the path sees the keys the offer carries (the collector
// revokes them when the connection ends) but cannot get an offer of
// their own.

// Endpoint addresses one end of a connection.
type Endpoint struct {
	MAC header.MAC
	GID roce.GID
	QPN uint32
}

// ExchangePort is the collector's default TCP port for the exchange.
const ExchangePort = 40050

// Hello is the translator's half of the exchange.
type Hello struct {
	// Name names the translator in the collector's logs and metrics.
	Name string     `json:"name"`
	IP   netip.Addr `json:"ip"`
	MAC  string     `json:"mac"`
	QPN  uint32     `json:"qpn"`
	PSN  uint32     `json:"psn"`
	// Nonce is the translator's challenge to the collector (hex), sent
	// when the translator has a key.
	Nonce string `json:"nonce,omitempty"`
	// Layout is the memory layout the translator writes; a collector
	// serving another refuses it, saying both (absent: the default).
	Layout Layout `json:"layout,omitempty"`
}

// Offer is the collector's half.
type Offer struct {
	Name string     `json:"name"`
	IP   netip.Addr `json:"ip"`
	MAC  string     `json:"mac"`
	QPN  uint32     `json:"qpn"`
	// MTU is the collector QP's path MTU in bytes.
	MTU int `json:"mtu"`
	// MaxAtomic is the QP's responder resources (max_dest_rd_atomic).
	MaxAtomic int     `json:"max_atomic"`
	Regions   Regions `json:"regions"`
	// Redundancy is the N the collector queries Key-Write and
	// Key-Increment with; reports carry their own N, and one above
	// this is written to slots no query reads.
	Redundancy int `json:"redundancy"`
	// Error, when set, is why the collector refused the translator.
	Error string `json:"error,omitempty"`
	// Challenge, when set, makes this message the collector's challenge
	// (hex nonce), not an offer. It also carries an Error, so a
	// translator from before authentication reports why it got nothing.
	Challenge string `json:"challenge,omitempty"`
}

// authMsg is the translator's answer to a challenge; proofMsg follows
// the collector's offer.
type authMsg struct {
	Auth string `json:"auth"`
}

type proofMsg struct {
	Proof string `json:"proof"`
}

// Limits of the exchange.
const (
	// MaxHelloLen bounds the Hello (and the translator's answer to the
	// challenge) the collector reads from a peer it does not know yet.
	MaxHelloLen = 4096
	// MinKeyLen is the shortest key accepted (128 bits).
	MinKeyLen = 16
	// MaxNameLen bounds a translator's name.
	MaxNameLen = 64
	nonceLen   = 32
)

// ErrAuth is wrapped by the errors of a failed authentication.
var ErrAuth = errors.New("dta: exchange authentication failed")

// ReadKey reads a shared exchange key from a file: its bytes with
// surrounding white space removed, at least MinKeyLen of them (e.g.
// `head -c 32 /dev/urandom | base64 > dta.key`). Like ssh with its
// private keys, it refuses a file anyone on the host may read.
func ReadKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("%s: mode %v lets every user read the key (chmod o-rwx)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinKeyLen {
		return nil, fmt.Errorf("%s: key of %d bytes, want at least %d", path, len(b), MinKeyLen)
	}
	return b, nil
}

// mac is the HMAC-SHA256 of a label and length-prefixed parts, so no
// two different sequences of parts hash the same bytes.
func mac(key []byte, label string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("dta-exchange-v1 " + label))
	var n [4]byte
	for _, p := range parts {
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return h.Sum(nil)
}

func newNonce() []byte {
	b := make([]byte, nonceLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return b
}

func decodeNonce(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != nonceLen {
		return nil, fmt.Errorf("%w: nonce %.80q: want %d hex bytes", ErrAuth, s, nonceLen)
	}
	return b, nil
}

// ValidName reports whether s may name a translator: 1..MaxNameLen
// letters, digits, '.', '_' or '-' (it lands in logs, metrics labels and
// JSON).
func ValidName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) < 0
}

// UnicastHost reports whether ip may be a host's RDMA address: valid,
// not unspecified, multicast, loopback or the broadcast address.
func UnicastHost(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsValid() && !ip.IsUnspecified() && !ip.IsMulticast() && !ip.IsLoopback() && ip != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// Validate checks a Hello. The collector puts its fields in its
// neighbour table, QP attributes, logs and metrics, so each must be
// what a translator could really have: a unicast address and MAC, a
// 24-bit QPN and PSN, a short plain name.
func (h *Hello) Validate() error {
	if !h.IP.IsValid() {
		return errors.New("dta: hello without an IP")
	}
	if !UnicastHost(h.IP) {
		return fmt.Errorf("dta: hello: IP %v is not a unicast host address", h.IP)
	}
	mac, err := header.ParseMAC(h.MAC)
	if err != nil {
		return fmt.Errorf("dta: hello: %w", err)
	}
	if mac == (header.MAC{}) || mac[0]&1 != 0 {
		return fmt.Errorf("dta: hello: MAC %v is not a unicast address", mac)
	}
	if h.QPN == 0 || h.QPN > 0xffffff {
		return fmt.Errorf("dta: hello: QPN %#x", h.QPN)
	}
	if h.PSN > 0xffffff {
		return fmt.Errorf("dta: hello: PSN %#x is over 24 bits", h.PSN)
	}
	if !ValidName(h.Name) {
		return fmt.Errorf("dta: hello: name %.80q: want 1..%d letters, digits, '.', '_' or '-'", h.Name, MaxNameLen)
	}
	return nil
}

// Endpoint is the collector's end of the connection the offer describes.
func (o *Offer) Endpoint() (Endpoint, error) {
	mac, err := header.ParseMAC(o.MAC)
	if err != nil {
		return Endpoint{}, fmt.Errorf("dta: offer from %s: %w", o.Name, err)
	}
	if !o.IP.IsValid() || o.QPN == 0 || o.QPN > 0xffffff {
		return Endpoint{}, fmt.Errorf("dta: offer from %s: bad address %v or QPN %#x", o.Name, o.IP, o.QPN)
	}
	// The translator writes to this address: as a Hello's, a unicast host.
	if !UnicastHost(o.IP) {
		return Endpoint{}, fmt.Errorf("dta: offer from %s: address %v is not a unicast host address", o.Name, o.IP)
	}
	return Endpoint{MAC: mac, GID: roce.GIDFromAddr(o.IP), QPN: o.QPN}, nil
}

// WriteMsg writes one message of the exchange.
func WriteMsg(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadMsg reads one message of the exchange (at most the reader's
// buffer: 1 MiB from NewMsgReader).
func ReadMsg(r *bufio.Reader, v any) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

// readLine reads one line, valid until the next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("dta: exchange message over %d bytes", r.Size())
	}
	return line, err
}

// NewMsgReader is the reader ReadMsg wants.
func NewMsgReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 1<<20) }

// Dial runs the translator's half of the exchange with the collector at
// addr: the returned connection stays open for the RDMA connection's life
// (closing it tells the collector to tear the QP down). With a key, the
// translator authenticates and takes an offer only from a collector that
// proves it holds the key too; without one, it refuses a collector that
// asks for authentication.
func Dial(ctx context.Context, addr string, h Hello, key []byte) (net.Conn, *Offer, error) {
	var nt []byte
	if key != nil {
		nt = newNonce()
		h.Nonce = hex.EncodeToString(nt)
	}
	if err := h.Validate(); err != nil {
		return nil, nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	o, err := exchange(c, h, key, nt)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("dta: exchange with %s: %w", addr, err)
	}
	_ = c.SetDeadline(time.Time{})
	if o.Error != "" {
		c.Close()
		if strings.Contains(o.Error, ErrAuth.Error()) {
			// The collector's refusal crosses the wire as text.
			return nil, nil, fmt.Errorf("%w: collector %s refused: %s", ErrAuth, addr, o.Error)
		}
		return nil, nil, fmt.Errorf("dta: collector %s refused: %s", addr, o.Error)
	}
	if err := o.Regions.Validate(); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("dta: collector %s: %w", addr, err)
	}
	// A collector of before the layout was negotiated does not check
	// the hello's: check its offer here too.
	if o.Regions.Layout != h.Layout {
		c.Close()
		return nil, nil, fmt.Errorf("dta: collector %s: %w", addr, LayoutMismatch(h.Layout, o.Regions.Layout))
	}
	if _, err := o.Endpoint(); err != nil {
		c.Close()
		return nil, nil, err
	}
	if w := o.Regions.MaxWrite(); o.MTU > 0 && w > o.MTU {
		c.Close()
		return nil, nil, fmt.Errorf("dta: collector %s: its regions need WRITEs of %d bytes, over its path MTU %d", addr, w, o.MTU)
	}
	return c, o, nil
}

// exchange sends the Hello and reads the offer, authenticating both
// ways when the translator has a key.
func exchange(c io.ReadWriter, h Hello, key, nt []byte) (*Offer, error) {
	hl, err := json.Marshal(&h)
	if err != nil {
		return nil, err
	}
	hl = append(hl, '\n')
	if _, err := c.Write(hl); err != nil {
		return nil, err
	}
	r := NewMsgReader(c)
	var o Offer
	if err := ReadMsg(r, &o); err != nil {
		return nil, err
	}
	switch {
	case o.Challenge == "" && o.Error != "":
		return &o, nil // a refusal, reported by Dial
	case o.Challenge == "" && key != nil:
		return nil, fmt.Errorf("%w: collector %s did not ask for authentication: with a key-file, the translator writes only into a collector that proves it holds the key", ErrAuth, o.Name)
	case o.Challenge == "":
		return &o, nil
	case key == nil:
		return nil, fmt.Errorf("%w: collector %s wants authentication: give the translator its key-file", ErrAuth, o.Name)
	}
	nc, err := decodeNonce(o.Challenge)
	if err != nil {
		return nil, err
	}
	if err := WriteMsg(c, &authMsg{Auth: hex.EncodeToString(mac(key, "translator", nc, nt, hl))}); err != nil {
		return nil, err
	}
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	ol := bytes.Clone(line)
	o = Offer{}
	if err := json.Unmarshal(ol, &o); err != nil {
		return nil, err
	}
	if o.Error != "" {
		return &o, nil
	}
	var p proofMsg
	if err := ReadMsg(r, &p); err != nil {
		return nil, fmt.Errorf("%w: collector %s sent no proof: %w", ErrAuth, o.Name, err)
	}
	got, err := hex.DecodeString(p.Proof)
	if err != nil || !hmac.Equal(got, mac(key, "collector", nt, nc, hl, ol)) {
		return nil, fmt.Errorf("%w: collector %s does not hold the key", ErrAuth, o.Name)
	}
	return &o, nil
}

// AuthFor is the translator's answer to challenge (hex) for a Hello
// sent as helloLine with nonce (hex): what Dial sends, for tests that
// play a translator sending what Dial would not.
func AuthFor(key []byte, challenge, nonce string, helloLine []byte) string {
	nc, _ := hex.DecodeString(challenge)
	nt, _ := hex.DecodeString(nonce)
	return hex.EncodeToString(mac(key, "translator", nc, nt, helloLine))
}

// Accepted is a Hello the collector read (and authenticated, when it has
// a key), waiting for the offer or the refusal.
type Accepted struct {
	Hello Hello
	// Authenticated is true when the peer proved it holds the key.
	Authenticated bool
	key, nt, nc   []byte
	line          []byte
}

// Accept runs the collector's half of the exchange up to the offer: it
// reads the Hello from r (a reader of at least MaxHelloLen) and, with a
// key, challenges the translator and checks its answer. name is the
// collector's, for the challenge. An error after the Hello was read
// comes with the Accepted, so the caller can name the translator when
// it refuses it.
func Accept(r *bufio.Reader, w io.Writer, name string, key []byte) (*Accepted, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	a := &Accepted{key: key, line: bytes.Clone(line)}
	if err := json.Unmarshal(a.line, &a.Hello); err != nil {
		return nil, fmt.Errorf("dta: hello: %w", err)
	}
	if key == nil {
		return a, nil
	}
	if a.Hello.Nonce == "" {
		return a, fmt.Errorf("%w: the translator sent no nonce: it has no key-file (or predates authentication)", ErrAuth)
	}
	if a.nt, err = decodeNonce(a.Hello.Nonce); err != nil {
		return a, err
	}
	a.nc = newNonce()
	ch := Offer{Name: name, Challenge: hex.EncodeToString(a.nc), Error: "authentication required: this translator predates the authenticated exchange"}
	if err := WriteMsg(w, &ch); err != nil {
		return a, err
	}
	var m authMsg
	if err := ReadMsg(r, &m); err != nil {
		return a, fmt.Errorf("%w: no answer to the challenge: %w", ErrAuth, err)
	}
	got, err := hex.DecodeString(m.Auth)
	if err != nil || !hmac.Equal(got, mac(key, "translator", a.nc, a.nt, a.line)) {
		return a, fmt.Errorf("%w: the translator does not hold the key", ErrAuth)
	}
	a.Authenticated = true
	return a, nil
}

// Offer sends the offer, followed by the collector's proof when the
// translator authenticated.
func (a *Accepted) Offer(w io.Writer, o *Offer) error {
	ol, err := json.Marshal(o)
	if err != nil {
		return err
	}
	ol = append(ol, '\n')
	if !a.Authenticated {
		_, err := w.Write(ol)
		return err
	}
	p := proofMsg{Proof: hex.EncodeToString(mac(a.key, "collector", a.nt, a.nc, a.line, ol))}
	pl, err := json.Marshal(&p)
	if err != nil {
		return err
	}
	_, err = w.Write(append(ol, append(pl, '\n')...))
	return err
}

// ErrLayout is a translator and a collector with different memory
// layouts.
var ErrLayout = errors.New("memory layouts differ")

// LayoutMismatch is the error of a translator writing layout t to a
// collector serving layout c.
func LayoutMismatch(t, c Layout) error {
	return fmt.Errorf("%w: the translator writes %s, the collector serves %s (set layout: the same in both spec files)", ErrLayout, t, c)
}
