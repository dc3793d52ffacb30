package perftest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOversizedLine: a peer that never ends its line is cut off at
// MaxLine with a clear error, not buffered without end.
func TestOversizedLine(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		// Far more than a line may be, and no newline.
		chunk := []byte(strings.Repeat("x", 1024))
		for range 64 {
			if _, err := b.Write(chunk); err != nil {
				return
			}
		}
	}()
	p := newPeer(a)
	_, _, err := p.wait(context.Background(), nil, 5*time.Second, "QP")
	if !errors.Is(err, ErrPeer) || !strings.Contains(err.Error(), "a line over 4096 bytes") {
		t.Fatalf("oversized line: %v", err)
	}
}

// addrLog keeps the listen address a server logs.
type addrLog struct {
	mu   sync.Mutex
	addr string
}

func (l *addrLog) handler() slog.Handler {
	return slogFunc(func(r slog.Record) {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "listen" {
				l.mu.Lock()
				l.addr = a.Value.String()
				l.mu.Unlock()
			}
			return true
		})
	})
}

func (l *addrLog) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr
}

type slogFunc func(slog.Record)

func (f slogFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (f slogFunc) Handle(_ context.Context, r slog.Record) error { f(r); return nil }
func (f slogFunc) WithAttrs([]slog.Attr) slog.Handler            { return f }
func (f slogFunc) WithGroup(string) slog.Handler                 { return f }

// TestServerLoopback: a server listens on loopback unless told where:
// the first client to connect gets its QPs and keys.
func TestServerLoopback(t *testing.T) {
	var l addrLog
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := RunSide(ctx, SideOptions{Port: 0, Log: slog.New(l.handler()), Report: io.Discard})
		done <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); l.get() == ""; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not say where it listens")
		}
	}
	if !strings.HasPrefix(l.get(), "127.0.0.1:") {
		t.Fatalf("the server listens on %s, not loopback", l.get())
	}
	cancel()
	<-done
}
