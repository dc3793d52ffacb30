package tuning

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/tuning/switchemu"
)

// emu starts an emulated switch of the vendor and its inventory entry.
func emu(t *testing.T, vendor, name string, o switchemu.Options) (*switchemu.Switch, Switch) {
	t.Helper()
	o.Vendor, o.User, o.Password = vendor, "admin", "secret"
	s, err := switchemu.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ports := map[string][]string{"sonic": {"Ethernet0", "Ethernet4"}, "eos": {"Ethernet1", "Ethernet2"}, "nxos": {"Ethernet1/1", "Ethernet1/2"},
		"vrp": {"100GE1/0/1", "100GE1/0/2"}, "comware": {"HundredGigE1/0/1", "HundredGigE1/0/2"}}[vendor]
	return s, Switch{Name: name, Layer: "leaf", Address: s.Addr, User: "admin", Password: "secret", Dialect: vendor,
		Ports: ports, Prio: 3, QueueCells: 16000}
}

// trusting is a pusher whose known_hosts holds the switches' keys.
func trusting(t *testing.T, sws ...*switchemu.Switch) *SSHPusher {
	t.Helper()
	var lines []string
	for _, s := range sws {
		lines = append(lines, s.KnownHosts())
	}
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := NewSSHPusher(path)
	if err != nil {
		t.Fatal(err)
	}
	p.Timeout = 5 * time.Second
	return p
}

var vendors = []string{"sonic", "eos", "nxos", "vrp", "comware"}

// wantLine is a line each vendor's running config shows once the first
// configuration below is in.
var wantLine = map[string]string{
	"sonic":   `"green_min_threshold": "256000"`,
	"eos":     "random-detect ecn minimum-threshold 256000 bytes maximum-threshold 384000 bytes max-mark-probability 10",
	"nxos":    "random-detect minimum-threshold 256000 bytes maximum-threshold 384000 bytes drop-probability 10 weight 0 ecn",
	"vrp":     "color green low-limit 6 high-limit 9 discard-percentage 10",
	"comware": "queue 3 drop-level 0 low-limit 1000 high-limit 1500 discard-probability 10",
}

func leafConfig(kmin int64, pmax float64) Config {
	return Uniform(PaperCell, Watermark{Kmin: kmin, Kmax: kmin + 500, Pmax: pmax, Headroom: 500, Alpha: 8}, "leaf")
}

// secondPort matches the push's first command for the switch's second
// port (a SONiC patch operation for it): failing there leaves the first
// port configured, a push that fails half-way.
func secondPort(vendor string, sw Switch) *regexp.Regexp {
	if vendor == "sonic" {
		return regexp.MustCompile(`QUEUE/` + sw.Ports[1])
	}
	return regexp.MustCompile(`^interface ` + regexp.QuoteMeta(sw.Ports[1]) + `$`)
}

func canonOf(t *testing.T, vendor, running string) string {
	d, _ := DialectByName(vendor)
	return d.canon(running)
}

// Each vendor: a push applies, verifies, commits and saves, leaving no
// checkpoint, session or file; a second push refused half-way leaves the
// switch running the first; one whose lines the switch silently does not
// take fails verification and is rolled back too.
func TestPushEachVendor(t *testing.T) {
	for _, v := range vendors {
		t.Run(v, func(t *testing.T) {
			s, sw := emu(t, v, "leaf1", switchemu.Options{})
			tg := &SwitchTarget{Switches: []Switch{sw}, Pusher: trusting(t, s)}
			ctx := context.Background()
			if err := tg.Apply(ctx, leafConfig(1000, 10)); err != nil {
				t.Fatal(err)
			}
			first := s.Running()
			if !strings.Contains(first, wantLine[v]) {
				t.Fatalf("running config lacks %q:\n%s", wantLine[v], first)
			}
			if canonOf(t, v, s.Startup()) != canonOf(t, v, first) {
				t.Errorf("not saved: startup\n%s\nrunning\n%s", s.Startup(), first)
			}
			if l := s.Leftovers(); len(l) > 0 {
				t.Errorf("left on the switch: %v", l)
			}
			if got := tg.Applied()["leaf1"]; len(got) != 1 || got[0].W.Kmin != 1000 {
				t.Errorf("applied %v", got)
			}
		})
	}
}

func TestPushFailingHalfWayLeavesSwitchAsItWas(t *testing.T) {
	for _, v := range vendors {
		t.Run(v, func(t *testing.T) {
			// On a configured switch and on a fresh one.
			for _, configured := range []bool{true, false} {
				s, sw := emu(t, v, "leaf1", switchemu.Options{})
				ctx := context.Background()
				if configured {
					tg := &SwitchTarget{Switches: []Switch{sw}, Pusher: trusting(t, s)}
					if err := tg.Apply(ctx, leafConfig(1000, 10)); err != nil {
						t.Fatal(err)
					}
				}
				s.SetFailOn(secondPort(v, sw))
				before := s.Running()
				tg := &SwitchTarget{Switches: []Switch{sw}, Pusher: trusting(t, s)}
				err := tg.Apply(ctx, leafConfig(2000, 20))
				var re *RefusedError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), "leaf1") {
					t.Fatalf("apply: %v", err)
				}
				if strings.Contains(err.Error(), "rollback of") {
					t.Errorf("the rollback failed: %v", err)
				}
				if got := canonOf(t, v, s.Running()); got != canonOf(t, v, before) {
					t.Errorf("running config changed:\nbefore\n%s\nafter\n%s", before, s.Running())
				}
				if l := s.Leftovers(); len(l) > 0 {
					t.Errorf("left on the switch: %v", l)
				}
				if len(tg.Applied()) != 0 {
					t.Errorf("a failed push was recorded: %v", tg.Applied())
				}
			}
		})
	}
}

// A switch that takes a command without error but keeps its own value is
// caught by reading the running config back, and rolled back.
func TestPushVerifiesRunningConfig(t *testing.T) {
	ignore := map[string]string{"sonic": `BUFFER_PG/Ethernet4`, "eos": `^random-detect`, "nxos": `^random-detect`, "vrp": `^color green`, "comware": `^queue 3 drop-level`}
	for _, v := range vendors {
		t.Run(v, func(t *testing.T) {
			s, sw := emu(t, v, "leaf1", switchemu.Options{Ignore: regexp.MustCompile(ignore[v])})
			before := s.Running()
			tg := &SwitchTarget{Switches: []Switch{sw}, Pusher: trusting(t, s)}
			err := tg.Apply(context.Background(), leafConfig(1000, 10))
			if err == nil || !strings.Contains(err.Error(), "verify") {
				t.Fatalf("apply: %v", err)
			}
			if strings.Contains(err.Error(), "rollback of") {
				t.Errorf("the rollback failed: %v", err)
			}
			if canonOf(t, v, s.Running()) != canonOf(t, v, before) {
				t.Errorf("running config changed:\n%s", s.Running())
			}
			if l := s.Leftovers(); len(l) > 0 {
				t.Errorf("left on the switch: %v", l)
			}
		})
	}
}

// Two switches of different vendors: when the second refuses, the first,
// already verified, is rolled back in its own session.
func TestPushRollsBackEarlierSwitches(t *testing.T) {
	a, swa := emu(t, "eos", "leaf1", switchemu.Options{})
	b, swb := emu(t, "comware", "leaf2", switchemu.Options{})
	b.SetFailOn(secondPort("comware", swb))
	beforeA, beforeB := a.Running(), b.Running()
	tg := &SwitchTarget{Switches: []Switch{swa, swb}, Pusher: trusting(t, a, b)}
	err := tg.Apply(context.Background(), leafConfig(1000, 10))
	if err == nil || !strings.Contains(err.Error(), "leaf2") {
		t.Fatalf("apply: %v", err)
	}
	if strings.Contains(err.Error(), "rollback of") {
		t.Errorf("a rollback failed: %v", err)
	}
	if canonOf(t, "eos", a.Running()) != canonOf(t, "eos", beforeA) || canonOf(t, "comware", b.Running()) != canonOf(t, "comware", beforeB) {
		t.Errorf("not rolled back:\n%s\n%s", a.Running(), b.Running())
	}
	for _, s := range []*switchemu.Switch{a, b} {
		if l := s.Leftovers(); len(l) > 0 {
			t.Errorf("left on a switch: %v", l)
		}
	}
}

// pushed says whether a switch saw any command that changes something
// (logging in and turning paging off do not).
func pushed(s *switchemu.Switch) []string {
	var out []string
	for _, c := range s.Commands() {
		if !regexp.MustCompile(`^(show |display |terminal |screen-length |enable$|echo \$\?$|$)`).MatchString(c) {
			out = append(out, c)
		}
	}
	return out
}

// Bad input stops a push before anything reaches any switch, with an
// error naming the switch (and the port, or the key).
func TestPushBadInput(t *testing.T) {
	ctx := context.Background()
	good, goodSw := emu(t, "eos", "leaf1", switchemu.Options{})
	other, otherSw := emu(t, "nxos", "leaf2", switchemu.Options{})
	p := trusting(t, good, other)
	for _, c := range []struct {
		name string
		sw   func() Switch
		want []string
	}{
		{"unknown dialect", func() Switch { s := otherSw; s.Dialect = "junos"; return s }, []string{"leaf2", `dialect "junos"`}},
		{"port outside the pattern", func() Switch {
			s := otherSw
			s.Ports = []string{"Ethernet1/1", "Ethernet1/2; reload"}
			return s
		}, []string{"leaf2", `"Ethernet1/2; reload"`, "NX-OS"}},
		{"a name of another vendor", func() Switch { s := otherSw; s.Ports = []string{"Ethernet1"}; return s }, []string{"leaf2", `"Ethernet1"`}},
		{"unreachable", func() Switch {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			addr := ln.Addr().String()
			ln.Close()
			s := otherSw
			s.Address = addr
			return s
		}, []string{"leaf2", "unreachable", "nothing was pushed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := &SwitchTarget{Switches: []Switch{goodSw, c.sw()}, Pusher: p}
			err := tg.Apply(ctx, leafConfig(1000, 10))
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, s := range []*switchemu.Switch{good, other} {
				if cmds := pushed(s); len(cmds) > 0 {
					t.Errorf("pushed %q", cmds)
				}
			}
		})
	}
	t.Run("host key not in known_hosts", func(t *testing.T) {
		stranger, strangerSw := emu(t, "vrp", "spine9", switchemu.Options{})
		tg := &SwitchTarget{Switches: []Switch{goodSw, strangerSw}, Pusher: trusting(t, good)}
		err := tg.Apply(ctx, leafConfig(1000, 10))
		if !errors.Is(err, ErrHostKey) {
			t.Fatalf("apply: %v", err)
		}
		t.Log(err)
		fp := strings.Fields(stranger.KnownHosts())[2][:8]
		for _, w := range []string{"spine9", "SHA256:", "ssh-ed25519", "known_hosts", "nothing was pushed"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q (key %s...)", err, w, fp)
			}
		}
		if stranger.Logins() != 0 || len(pushed(good)) > 0 {
			t.Errorf("logged in to the stranger (%d) or pushed %q", stranger.Logins(), pushed(good))
		}
	})
	t.Run("host key changed", func(t *testing.T) {
		// known_hosts names the switch's address with another switch's key.
		impostor, impostorSw := emu(t, "comware", "leaf3", switchemu.Options{})
		p := trusting(t, good)
		f := p.KnownHosts
		host := strings.Fields(impostor.KnownHosts())[0]
		if err := os.WriteFile(f, []byte(good.KnownHosts()+"\n"+host+" "+strings.Join(strings.Fields(other.KnownHosts())[1:], " ")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p2, err := NewSSHPusher(f)
		if err != nil {
			t.Fatal(err)
		}
		tg := &SwitchTarget{Switches: []Switch{goodSw, impostorSw}, Pusher: p2}
		err = tg.Apply(ctx, leafConfig(1000, 10))
		if !errors.Is(err, ErrHostKey) || !strings.Contains(err.Error(), "leaf3") || !strings.Contains(err.Error(), "another key") {
			t.Fatalf("apply: %v", err)
		}
		if impostor.Logins() != 0 || len(pushed(good)) > 0 {
			t.Errorf("logged in to the impostor (%d) or pushed %q", impostor.Logins(), pushed(good))
		}
	})
}

// A switch nobody answers for stops the tuner with the best so far.
func TestUnreachableSwitchStopsRun(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	sws := []Switch{{Name: "leaf9", Layer: "leaf", Address: addr, User: "admin", Password: "x", Dialect: "vrp", Ports: []string{"100GE1/0/1"}, Prio: 3, QueueCells: 16000}}
	p, _ := NewSSHPusher("insecure")
	p.Timeout = 5 * time.Second
	tg := &SwitchTarget{Switches: sws, Pusher: p, Source: StubSource{T: tel1(1e9, 0)}}
	s := PaperSpace("leaf")
	a, _ := NewAnneal(&s, PaperAnneal(), 1, nil)
	tu := &Tuner{Space: &s, Objective: fixedObj(), Target: tg, Optimizer: a, Budget: 10}
	r, err := tu.Run(context.Background())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(r.Stopped, "unreachable") || !strings.Contains(err.Error(), "leaf9") {
		t.Fatalf("err %v, stopped %q", err, r.Stopped)
	}
	// A scope that matches nothing in the inventory is unreachable too.
	if err := tg.Apply(context.Background(), Uniform(PaperCell, Watermark{Pmax: 1, Alpha: 1}, "spine")); !errors.Is(err, ErrUnreachable) {
		t.Errorf("unknown layer: %v", err)
	}
}
