package perftest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"
)

// DefaultPort is perftest's TCP port for the exchange.
const DefaultPort = 18515

// DefaultBind is where a server listens unless told.
const DefaultBind = "127.0.0.1"

// SideOptions are one side of a test between two processes, as perftest's
// binaries run it: the side without a server address is the server.
type SideOptions struct {
	// Server is the server's host[:port]; empty makes this side the server.
	Server string
	// Port is the TCP port the server listens on, and the one a client
	// dials when Server names none.
	Port int
	// Bind is the address the server listens on: loopback when empty, as
	// the exchange hands the server's QPs and keys to whoever connects
	// first; a client on another host needs it set ("0.0.0.0" for all).
	Bind   string
	Config Config
	// Params is the client's test; a server takes the client's.
	Params Params
	// Report receives perftest's report; nil for none.
	Report io.Writer
	Log    *slog.Logger
}

// RunSide runs one side: a server that accepts one client, or a client.
func RunSide(ctx context.Context, o SideOptions) ([]Result, error) {
	if o.Server == "" {
		return serveOne(ctx, o)
	}
	conn, err := Dial(ctx, o.Server, o.Port)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return RunClient(ctx, conn, o.Config, o.Params, o.Report)
}

// serveOne listens on o.Port and serves the first client; the end of ctx
// closes the listener, so a server nobody connects to still stops.
func serveOne(ctx context.Context, o SideOptions) ([]Result, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(cmp.Or(o.Bind, DefaultBind), strconv.Itoa(o.Port)))
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	if o.Log != nil {
		o.Log.Info("waiting for a client", "listen", ln.Addr().String())
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	conn, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	defer conn.Close()
	return RunServer(ctx, conn, o.Config, o.Report)
}

// Dial connects to a perftest server (host[:port], port by default),
// retrying while it starts, as perftest does.
func Dial(ctx context.Context, server string, port int) (net.Conn, error) {
	addr := server
	if _, _, err := net.SplitHostPort(server); err != nil {
		addr = net.JoinHostPort(server, strconv.Itoa(port))
	}
	var d net.Dialer
	var conn net.Conn
	var err error
	for try := 0; ; try++ {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err = d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil || try >= 20 || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to the server: %w", err)
	}
	return conn, nil
}
