package dtamem

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
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
}

// Validate checks a Hello.
func (h *Hello) Validate() error {
	if !h.IP.IsValid() {
		return errors.New("dta: hello without an IP")
	}
	if _, err := header.ParseMAC(h.MAC); err != nil {
		return fmt.Errorf("dta: hello: %w", err)
	}
	if h.QPN == 0 || h.QPN > 0xffffff {
		return fmt.Errorf("dta: hello: QPN %#x", h.QPN)
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

// ReadMsg reads one message of the exchange (at most 1 MiB).
func ReadMsg(r *bufio.Reader, v any) error {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return errors.New("dta: exchange message over 1 MiB")
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

// NewMsgReader is the reader ReadMsg wants.
func NewMsgReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 1<<20) }

// Dial runs the translator's half of the exchange with the collector at
// addr: the returned connection stays open for the RDMA connection's life
// (closing it tells the collector to tear the QP down).
func Dial(ctx context.Context, addr string, h Hello) (net.Conn, *Offer, error) {
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
	var o Offer
	if err := WriteMsg(c, &h); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("dta: exchange with %s: %w", addr, err)
	}
	if err := ReadMsg(NewMsgReader(c), &o); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("dta: exchange with %s: %w", addr, err)
	}
	_ = c.SetDeadline(time.Time{})
	if o.Error != "" {
		c.Close()
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
	return c, &o, nil
}

// ErrLayout is a translator and a collector with different memory
// layouts.
var ErrLayout = errors.New("memory layouts differ")

// LayoutMismatch is the error of a translator writing layout t to a
// collector serving layout c.
func LayoutMismatch(t, c Layout) error {
	return fmt.Errorf("%w: the translator writes %s, the collector serves %s (set layout: the same in both spec files)", ErrLayout, t, c)
}
