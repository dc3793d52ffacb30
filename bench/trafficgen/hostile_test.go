package trafficgen

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// serveHostile runs Serve against a peer that sends b and holds the
// connection open for hold, and returns Serve's error.
func serveHostile(t *testing.T, ctx context.Context, b []byte, hold time.Duration) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(b)
		time.Sleep(hold)
	}()
	_, _, err = Serve(ctx, ln, Endpoint{})
	return err
}

// TestOversizedMessage: a requester that never ends its message is cut
// off at MaxMessage with a clear error; the responder does not buffer it
// without end (a json.Decoder on the connection did).
func TestOversizedMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// An object that never closes: valid JSON so far, no newline.
	err := serveHostile(t, ctx, []byte(`{"params": {"rdma_verb": "`+strings.Repeat("w", 2*MaxMessage)), 0)
	if !errors.Is(err, ErrPeer) || !strings.Contains(err.Error(), "a message over 1048576 bytes") {
		t.Fatalf("oversized message: %v", err)
	}
}

// TestGarbage: a line that is not a message ends the exchange as the
// peer's fault, with no QP made.
func TestGarbage(t *testing.T) {
	err := serveHostile(t, context.Background(), []byte("GET / HTTP/1.0\r\n\r\n"), time.Second)
	if !errors.Is(err, ErrPeer) {
		t.Fatalf("garbage: %v", err)
	}
}
