package tuning

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// fakeSwitch is an in-process SSH server that records every command it
// is asked to run and fails those containing failOn.
type fakeSwitch struct {
	addr   string
	mu     sync.Mutex
	cmds   []string
	failOn string
	ln     net.Listener
}

func newFakeSwitch(t *testing.T, failOn string) *fakeSwitch {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PasswordCallback: func(c ssh.ConnMetadata, pass []byte) (*ssh.Permissions, error) {
		if c.User() == "admin" && string(pass) == "secret" {
			return nil, nil
		}
		return nil, errors.New("denied")
	}}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSwitch{addr: ln.Addr().String(), failOn: failOn, ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c, cfg)
		}
	}()
	return f
}

func (f *fakeSwitch) serve(c net.Conn, cfg *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		c.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, in, err := nc.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer ch.Close()
			for req := range in {
				if req.Type != "exec" || len(req.Payload) < 4 {
					req.Reply(false, nil)
					continue
				}
				n := binary.BigEndian.Uint32(req.Payload)
				cmd := string(req.Payload[4 : 4+n])
				req.Reply(true, nil)
				f.mu.Lock()
				f.cmds = append(f.cmds, cmd)
				fail := f.failOn != "" && strings.Contains(cmd, f.failOn)
				f.mu.Unlock()
				status := uint32(0)
				if fail {
					ch.Stderr().Write([]byte("% Invalid input detected\n"))
					status = 1
				}
				ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
				return
			}
		}()
	}
}

func (f *fakeSwitch) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

func pusher() *SSHPusher {
	return &SSHPusher{HostKeys: ssh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second}
}

// A push goes command by command; a refused command rolls back every
// switch this push touched: to the configuration it had, or (never
// configured) to its defaults through the dialect's undo.
func TestSSHPushAndRollback(t *testing.T) {
	ok := newFakeSwitch(t, "")
	bad := newFakeSwitch(t, "random-detect ecn minimum-threshold")
	sws := []Switch{
		{Name: "leaf0", Layer: "leaf", Address: ok.addr, User: "admin", Password: "secret", Dialect: "comware", Ports: []string{"HGE1/0/1"}, Prio: 3},
		{Name: "leaf1", Layer: "leaf", Address: bad.addr, User: "admin", Password: "secret", Dialect: "eos", Ports: []string{"Ethernet1", "Ethernet2"}, Prio: 3},
	}
	tg := &SwitchTarget{Switches: sws, Pusher: pusher(), Source: StubSource{T: tel1(20e9, 1000)}}
	s := PaperSpace("leaf")
	ctx := context.Background()
	render := func(d string, sw Switch, w Watermark) []string {
		c, err := Dialects()[d].Apply(Intent{Switch: sw.Name, Ports: sw.Ports, Prio: 3, Cell: PaperCell, W: w})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	join := func(c []string) string { return strings.Join(c, "\n") }
	failedAt := func(cmds []string, what string) int {
		for i, c := range cmds {
			if strings.Contains(c, what) {
				return i
			}
		}
		t.Fatalf("never saw %q in %q", what, cmds)
		return -1
	}

	// 1. Nothing configured yet: leaf1 refuses; both get the undo.
	first, _ := s.Config(Point{2, 1, 3, 2})
	err := tg.Apply(ctx, first)
	if err == nil || !strings.Contains(err.Error(), "leaf1") {
		t.Fatalf("apply: %v", err)
	}
	undo0 := Dialects()["comware"].Undo(Intent{Switch: "leaf0", Ports: sws[0].Ports, Prio: 3, Cell: PaperCell})
	undo1 := Dialects()["eos"].Undo(Intent{Switch: "leaf1", Ports: sws[1].Ports, Prio: 3, Cell: PaperCell})
	if got, want := join(ok.commands()), join(append(render("comware", sws[0], first.Scopes["leaf"]), undo0...)); got != want {
		t.Errorf("leaf0 got\n%s\nwant its push then its undo\n%s", got, want)
	}
	bc := bad.commands()
	i := failedAt(bc, "random-detect ecn minimum-threshold")
	if join(bc[i+1:]) != join(undo1) {
		t.Errorf("leaf1 after the refused command:\n%s\nwant the undo\n%s", join(bc[i+1:]), join(undo1))
	}
	if len(tg.Applied()) != 0 {
		t.Errorf("a failed push was recorded: %v", tg.Applied())
	}

	// 2. Both take the first configuration; then leaf1 refuses the
	// second's thresholds and both return to the first.
	bad.mu.Lock()
	bad.failOn = ""
	bad.mu.Unlock()
	if err := tg.Apply(ctx, first); err != nil {
		t.Fatal(err)
	}
	second, _ := s.Config(Point{8, 5, 4, 4})
	bad.mu.Lock()
	bad.failOn = fmt.Sprintf("minimum-threshold %d bytes", second.Scopes["leaf"].Kmin*PaperCell)
	bad.mu.Unlock()
	n0, n1 := len(ok.commands()), len(bad.commands())
	if err := tg.Apply(ctx, second); err == nil {
		t.Fatal("second apply succeeded")
	}
	if got, want := join(ok.commands()[n0:]), join(append(render("comware", sws[0], second.Scopes["leaf"]), render("comware", sws[0], first.Scopes["leaf"])...)); got != want {
		t.Errorf("leaf0 was not rolled back to the first configuration:\n%s", got)
	}
	bc = bad.commands()[n1:]
	i = failedAt(bc, bad.failOn)
	if join(bc[i+1:]) != join(render("eos", sws[1], first.Scopes["leaf"])) {
		t.Errorf("leaf1 was not rolled back to the first configuration:\n%s", join(bc[i+1:]))
	}
	if got := tg.Applied()["leaf0"][0].W; got != first.Scopes["leaf"] {
		t.Errorf("leaf0 recorded as %v after the rollback", got)
	}
	tel, err := tg.Measure(ctx, time.Millisecond)
	if err != nil || !strings.HasPrefix(tel.Source, "stub") {
		t.Fatalf("stub telemetry: %v %q", err, tel.Source)
	}
}

// A switch nobody answers for stops the tuner with the best so far.
func TestUnreachableSwitchStopsRun(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	sws := []Switch{{Name: "leaf9", Layer: "leaf", Address: addr, User: "admin", Password: "x", Dialect: "vrp", Ports: []string{"100GE1/0/1"}, Prio: 3}}
	tg := &SwitchTarget{Switches: sws, Pusher: pusher(), Source: StubSource{T: tel1(1e9, 0)}}
	s := PaperSpace("leaf")
	a, _ := NewAnneal(&s, PaperAnneal(), 1, nil)
	tu := &Tuner{Space: &s, Objective: fixedObj(), Target: tg, Optimizer: a, Budget: 10}
	r, err := tu.Run(context.Background())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(r.Stopped, "unreachable") {
		t.Fatalf("err %v, stopped %q", err, r.Stopped)
	}
	// A scope that matches nothing in the inventory is unreachable too.
	if err := tg.Apply(context.Background(), Uniform(PaperCell, Watermark{Pmax: 1, Alpha: 1}, "spine")); !errors.Is(err, ErrUnreachable) {
		t.Errorf("unknown layer: %v", err)
	}
}
