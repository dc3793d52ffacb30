package trafficgen

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/translator/inject"
	"github.com/rdma-appliance/appliance/verbs"
)

// The two sides on two hosts (`appliance lumina trafficgen`): the
// responder listens, the requester dials it.

// NewEndpoint is dev's endpoint on its port ibPort, with the GID at
// gidIndex; multi gives the QPs the GIDs from gidIndex on, one each.
func NewEndpoint(dev verbs.Device, ibPort, gidIndex int, multi bool) (Endpoint, error) {
	ep := Endpoint{Dev: dev, GIDIndex: gidIndex}
	pa, err := dev.QueryPort(ibPort)
	if err != nil {
		return ep, err
	}
	gids := pa.GIDs
	if gidIndex >= len(gids) {
		return ep, fmt.Errorf("GID index %d: the device has %d GIDs", gidIndex, len(gids))
	}
	ep.GID = gids[gidIndex].Addr()
	if multi {
		for _, g := range gids[gidIndex:] {
			ep.MultiGID = append(ep.MultiGID, g.Addr())
		}
	}
	return ep, nil
}

// Response is what the responder saw of a test.
type Response struct {
	Params *Params
	// Correct QPs of all QPs hold in memory what was sent.
	Correct, QPs int
}

// Respond listens on TCP port at bind (loopback when empty: the first
// peer to connect gets QPs and keys, so listening where requesters on
// other hosts reach it is asked for), serves one requester's test on ep
// and checks its memory.
func Respond(ctx context.Context, bind string, port int, ep Endpoint, log *slog.Logger) (*Response, error) {
	if bind == "" {
		bind = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	log.Info("responder listening", "addr", ln.Addr().String(), "gid", ep.GID)
	tp, ok, err := Serve(ctx, ln, ep)
	if err != nil {
		return nil, err
	}
	r := &Response{Params: tp, QPs: len(ok)}
	for _, v := range ok {
		if v {
			r.Correct++
		}
	}
	return r, nil
}

// ResponderAddr is host[:port], port by default.
func ResponderAddr(host string, port int) string {
	if _, _, err := net.SplitHostPort(host); err != nil {
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	return host
}

// InjectorPush is the ready hook of Dial that loads the test into the
// injector at addr once the connections are known: req's intents with
// the connections, p's geometry, counters reset.
func InjectorPush(addr string, req inject.LoadRequest, p Params) func([]intent.Conn) error {
	p = p.Defaults()
	req.Geometry = intent.Geometry{Verb: p.Verb, MessageSize: p.MessageSize, MTU: p.MTU, NumMessages: p.MsgsPerQP}
	req.SendConns, req.Reset = p.SendQPs, true
	c := service.NewClient(addr)
	return func(conns []intent.Conn) error {
		req.Conns = conns
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Do(ctx, "POST", "/v1/load", req, nil)
	}
}
