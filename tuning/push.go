package tuning

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Switch is one real switch the tuner configures.
type Switch struct {
	Name    string `json:"name" yaml:"name"`
	Layer   string `json:"layer" yaml:"layer"`
	Address string `json:"address" yaml:"address"` // host:port of its SSH server
	User    string `json:"user" yaml:"user"`
	// KeyFile is a private key; Password is used when there is none.
	KeyFile  string `json:"key_file,omitempty" yaml:"key-file"`
	Password string `json:"-" yaml:"password"`
	Dialect  string `json:"dialect" yaml:"dialect"`
	// Ports are its interfaces in the vendor's names; a port scope
	// "port:NAME/i" means Ports[i].
	Ports []string `json:"ports" yaml:"ports"`
	Prio  int      `json:"prio" yaml:"prio"`
	// QueueCells is the lossless queue's length in cells, for vendors
	// whose WRED limits are percentages of it (vrp).
	QueueCells int64 `json:"queue_cells,omitempty" yaml:"queue-cells"`
}

// SwitchTarget tunes real switches. Apply renders every switch's
// configuration and checks it (dialect, port names) before contacting any
// switch, then opens one session per switch (host keys checked; a switch
// that cannot be reached or trusted stops the push before anything is
// sent), and pushes switch by switch: each in its vendor's transaction
// (checkpoint, configuration session or candidate; tentative commit), read
// back from the running configuration. A switch that refuses a command or
// does not show what was pushed is rolled back in the same session, and so
// is every switch this Apply already changed; only when all have verified
// are the commits confirmed and saved. Measure reads the telemetry source.
type SwitchTarget struct {
	Switches []Switch
	Pusher   Pusher
	Source   TelemetrySource

	mu      sync.Mutex
	applied map[string][]Intent
}

// Intents are the per-switch intents c asks for: per-port scopes give a
// port its own intent, switch scopes beat layer scopes.
func (t *SwitchTarget) Intents(c Config) (map[string][]Intent, error) {
	out := map[string][]Intent{}
	used := map[string]bool{}
	for _, sw := range t.Switches {
		w, ok := c.Scopes[ScopeSwitchPrefix+sw.Name]
		if ok {
			used[ScopeSwitchPrefix+sw.Name] = true
		} else if w, ok = c.Scopes[sw.Layer]; ok {
			used[sw.Layer] = true
		}
		in := Intent{Switch: sw.Name, Prio: sw.Prio, Cell: c.Cell, QueueCells: sw.QueueCells}
		rest := []string{}
		for i, p := range sw.Ports {
			scope := fmt.Sprintf("%s%s/%d", ScopePortPrefix, sw.Name, i)
			if pw, pok := c.Scopes[scope]; pok {
				used[scope] = true
				pin := in
				pin.Ports, pin.W = []string{p}, pw
				out[sw.Name] = append(out[sw.Name], pin)
				continue
			}
			rest = append(rest, p)
		}
		if ok && len(rest) > 0 {
			in.Ports, in.W = rest, w
			out[sw.Name] = append(out[sw.Name], in)
		}
	}
	for _, s := range c.ScopeNames() {
		if !used[s] {
			return nil, fmt.Errorf("%w: scope %s matches no switch or port of the inventory", ErrUnreachable, s)
		}
	}
	return out, nil
}

// switchPush is one switch's part of an Apply.
type switchPush struct {
	sw     Switch
	d      Dialect
	ins    []Intent
	p      plan
	c      Conn
	before string // the running configuration before, canonical
}

// pushID names a push's checkpoint, session or file: unique, so two pushes
// (or two appliances) never share one, and recognisable on the switch.
func pushID() string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("bytetuning-%x-%s", time.Now().Unix(), hex.EncodeToString(b[:]))
}

// plans renders and checks every switch's push; nothing is contacted.
func (t *SwitchTarget) plans(want map[string][]Intent) ([]*switchPush, error) {
	var out []*switchPush
	for _, sw := range t.Switches {
		ins := want[sw.Name]
		if len(ins) == 0 {
			continue
		}
		d, err := DialectByName(sw.Dialect)
		if err != nil {
			return nil, fmt.Errorf("switch %s: %w", sw.Name, err)
		}
		cmds, err := d.Apply(ins) // its errors name the switch
		if err != nil {
			return nil, err
		}
		out = append(out, &switchPush{sw: sw, d: d, ins: ins, p: d.plan(cmds, pushID())})
	}
	return out, nil
}

// Apply pushes c, all or nothing.
func (t *SwitchTarget) Apply(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	want, err := t.Intents(c)
	if err != nil {
		return err
	}
	pushes, err := t.plans(want)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.applied == nil {
		t.applied = map[string][]Intent{}
	}
	defer func() {
		for _, p := range pushes {
			if p.c != nil {
				p.c.Close()
			}
		}
	}()
	for _, p := range pushes {
		if p.c, err = t.Pusher.Open(ctx, p.sw); err != nil {
			return fmt.Errorf("%w (nothing was pushed to any switch)", err)
		}
	}
	for i, p := range pushes {
		if err := p.prepare(ctx); err != nil {
			errs := []error{err}
			for j := i - 1; j >= 0; j-- {
				errs = append(errs, pushes[j].undo(ctx, true))
			}
			return errors.Join(errs...)
		}
	}
	var errs []error
	for _, p := range pushes {
		if err := p.confirm(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		t.applied[p.sw.Name] = p.ins
	}
	return errors.Join(errs...)
}

// prepare reads the running configuration, runs the transaction up to the
// tentative commit and verifies; on any failure the switch is returned to
// what it was, in the same session.
func (p *switchPush) prepare(ctx context.Context) error {
	before, err := p.c.Run(ctx, step{cmd: p.p.show})
	if err != nil {
		return fmt.Errorf("push to %s: reading the running config: %w", p.sw.Name, err)
	}
	p.before = p.d.canon(before)
	for i, s := range p.p.prepare {
		if _, err := p.c.Run(ctx, s); err != nil {
			return errors.Join(fmt.Errorf("push to %s: %w", p.sw.Name, err), p.undo(ctx, i >= p.p.live))
		}
	}
	running, err := p.c.Run(ctx, step{cmd: p.p.show})
	if err == nil {
		err = p.d.verify(running, p.ins)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("push to %s: verify: %w", p.sw.Name, err), p.undo(ctx, true))
	}
	return nil
}

// undo leaves any configuration mode, then discards (nothing reached the
// running configuration yet) or rolls back, and checks the running
// configuration is the one before the push. It runs even when the push's
// context has ended: a half-done push must not stay.
func (p *switchPush) undo(ctx context.Context, live bool) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	run := func(ss []step) {
		for _, s := range ss {
			if _, err := p.c.Run(ctx, s); err != nil {
				errs = append(errs, err)
			}
		}
	}
	run(p.d.cli().base(p.c.Prompt()))
	if !live {
		run(p.p.discard)
	} else {
		run(p.p.rollback)
		if now, err := p.c.Run(ctx, step{cmd: p.p.show}); err != nil {
			errs = append(errs, err)
		} else if d := firstDiff(p.before, p.d.canon(now)); d != "" {
			errs = append(errs, fmt.Errorf("running config differs from before the push: %s", d))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("rollback of %s: %w", p.sw.Name, errors.Join(errs...))
	}
	return nil
}

// confirm makes the push final. A failure before the commit is confirmed
// still rolls the switch back; after it (saving, cleaning up) the new
// configuration stays running and the error says so.
func (p *switchPush) confirm(ctx context.Context) error {
	for i, s := range p.p.confirm {
		if _, err := p.c.Run(ctx, s); err != nil {
			if i < p.p.undoable {
				return errors.Join(fmt.Errorf("confirm on %s: %w", p.sw.Name, err), p.undo(ctx, true))
			}
			return fmt.Errorf("%s runs the new configuration, but: %w", p.sw.Name, err)
		}
	}
	return nil
}

// firstDiff is the first line where two configurations differ ("" when
// equal).
func firstDiff(a, b string) string {
	if a == b {
		return ""
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d was %q, is %q", i+1, x, y)
		}
	}
	return "they differ"
}

// Measure reads the source.
func (t *SwitchTarget) Measure(ctx context.Context, d time.Duration) (Telemetry, error) {
	if t.Source == nil {
		return Telemetry{}, fmt.Errorf("%w: no telemetry source", ErrNoTelemetry)
	}
	return t.Source.Read(ctx, d)
}

// Applied is what each switch was last configured with.
func (t *SwitchTarget) Applied() map[string][]Intent {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string][]Intent{}
	for k, v := range t.applied {
		out[k] = v
	}
	return out
}

// RenderConfig renders c for every switch of the inventory in its own
// dialect, or all in dialect when it is not empty (a report).
func RenderConfig(c Config, switches []Switch, dialect string) (string, error) {
	t := &SwitchTarget{Switches: switches}
	want, err := t.Intents(c)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	var out strings.Builder
	for _, n := range names {
		var sw Switch
		for _, s := range switches {
			if s.Name == n {
				sw = s
			}
		}
		dn := sw.Dialect
		if dialect != "" {
			dn = dialect
		}
		d, err := DialectByName(dn)
		if err != nil {
			return "", err
		}
		txt, err := Render(d, want[n]...)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "# %s (%s)\n%s\n", n, dn, txt)
	}
	return out.String(), nil
}
