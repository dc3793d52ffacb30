package tuning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
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
}

// Pusher runs configuration commands on a switch, in order, and says how
// many succeeded.
type Pusher interface {
	Run(ctx context.Context, sw Switch, cmds []string) (done int, err error)
}

// SSHPusher runs each command in its own SSH session (an exec request),
// so a command's exit status says whether the switch took it.
type SSHPusher struct {
	// HostKeys checks the switch's host key: a known_hosts file's
	// callback, or ssh.InsecureIgnoreHostKey for a lab.
	HostKeys ssh.HostKeyCallback
	Timeout  time.Duration
}

// NewSSHPusher checks host keys against knownHosts (a known_hosts file);
// "insecure" accepts any key (labs only).
func NewSSHPusher(knownHosts string) (*SSHPusher, error) {
	if knownHosts == "insecure" {
		return &SSHPusher{HostKeys: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second}, nil
	}
	cb, err := knownhosts.New(knownHosts)
	if err != nil {
		return nil, fmt.Errorf("ssh: known hosts: %w", err)
	}
	return &SSHPusher{HostKeys: cb, Timeout: 10 * time.Second}, nil
}

func (p *SSHPusher) client(ctx context.Context, sw Switch) (*ssh.Client, error) {
	var auth []ssh.AuthMethod
	if sw.KeyFile != "" {
		b, err := os.ReadFile(sw.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("ssh %s: key: %w", sw.Name, err)
		}
		signer, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("ssh %s: key %s: %w", sw.Name, sw.KeyFile, err)
		}
		auth = append(auth, ssh.PublicKeys(signer))
	}
	if sw.Password != "" {
		auth = append(auth, ssh.Password(sw.Password))
	}
	cfg := &ssh.ClientConfig{User: sw.User, Auth: auth, HostKeyCallback: p.HostKeys, Timeout: p.Timeout}
	d := net.Dialer{Timeout: p.Timeout}
	conn, err := d.DialContext(ctx, "tcp", sw.Address)
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %w", ErrUnreachable, sw.Name, sw.Address, err)
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, sw.Address, cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %s: ssh: %w", ErrUnreachable, sw.Name, err)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// Run sends cmds one session each and stops at the first failure.
func (p *SSHPusher) Run(ctx context.Context, sw Switch, cmds []string) (int, error) {
	c, err := p.client(ctx, sw)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	for i, cmd := range cmds {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		s, err := c.NewSession()
		if err != nil {
			return i, fmt.Errorf("ssh %s: session: %w", sw.Name, err)
		}
		out, err := s.CombinedOutput(cmd)
		s.Close()
		if err != nil {
			return i, fmt.Errorf("ssh %s: command %d %q: %w (%s)", sw.Name, i+1, firstLine(cmd), err, firstLine(string(out)))
		}
	}
	return len(cmds), nil
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i] + " ..."
		}
	}
	return s
}

// TelemetrySource supplies a real network's telemetry: gNMI, SNMP, an INT
// collector or DTA counters behind one call.
type TelemetrySource interface {
	Read(ctx context.Context, d time.Duration) (Telemetry, error)
}

// HTTPSource reads Telemetry as JSON from a collector's URL (GET, with
// ?duration=NANOSECONDS), the form an INT or DTA collector exposes to
// the tuner. It waits d first so the interval is measured under the new
// configuration.
type HTTPSource struct {
	URL    string
	Client *http.Client
}

// Read waits d, then fetches.
func (h HTTPSource) Read(ctx context.Context, d time.Duration) (Telemetry, error) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return Telemetry{}, fmt.Errorf("%w: %w", ErrNoTelemetry, ctx.Err())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?duration=%d", h.URL, d.Nanoseconds()), nil)
	if err != nil {
		return Telemetry{}, err
	}
	cl := h.Client
	if cl == nil {
		cl = http.DefaultClient
	}
	resp, err := cl.Do(req)
	if err != nil {
		return Telemetry{}, fmt.Errorf("%w: %s: %w", ErrNoTelemetry, h.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Telemetry{}, fmt.Errorf("%w: %s: %s", ErrNoTelemetry, h.URL, resp.Status)
	}
	var t Telemetry
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return Telemetry{}, fmt.Errorf("telemetry from %s: %w", h.URL, err)
	}
	if t.Duration == 0 {
		t.Duration = d.Nanoseconds()
	}
	return t, nil
}

// StubSource is a stand-in that returns fixed telemetry; it is what a
// switch target uses in tests and dry runs, and says so in Source.
type StubSource struct{ T Telemetry }

// Read returns the fixed telemetry.
func (s StubSource) Read(_ context.Context, d time.Duration) (Telemetry, error) {
	t := s.T
	t.Source = "stub (fixed telemetry, not measured)"
	if t.Duration == 0 {
		t.Duration = d.Nanoseconds()
	}
	return t, nil
}

// SwitchTarget tunes real switches: Apply renders the configuration in
// each switch's dialect and pushes it; if any switch refuses a command,
// every switch already changed in this Apply is rolled back (to its
// previous intent, or to the defaults through the dialect's undo) and
// Apply fails. Measure reads the telemetry source.
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
		rest := []string{}
		for i, p := range sw.Ports {
			scope := fmt.Sprintf("%s%s/%d", ScopePortPrefix, sw.Name, i)
			if pw, pok := c.Scopes[scope]; pok {
				used[scope] = true
				out[sw.Name] = append(out[sw.Name], Intent{Switch: sw.Name, Ports: []string{p}, Prio: sw.Prio, Cell: c.Cell, W: pw})
				continue
			}
			rest = append(rest, p)
		}
		if ok && len(rest) > 0 {
			out[sw.Name] = append(out[sw.Name], Intent{Switch: sw.Name, Ports: rest, Prio: sw.Prio, Cell: c.Cell, W: w})
		}
	}
	for _, s := range c.ScopeNames() {
		if !used[s] {
			return nil, fmt.Errorf("%w: scope %s matches no switch or port of the inventory", ErrUnreachable, s)
		}
	}
	return out, nil
}

func (t *SwitchTarget) dialect(sw Switch) (Dialect, error) { return DialectByName(sw.Dialect) }

// Apply pushes c, all or nothing.
func (t *SwitchTarget) Apply(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	want, err := t.Intents(c)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.applied == nil {
		t.applied = map[string][]Intent{}
	}
	var changed []Switch
	for _, sw := range t.Switches {
		ins := want[sw.Name]
		if len(ins) == 0 {
			continue
		}
		d, err := t.dialect(sw)
		if err != nil {
			return err
		}
		var cmds []string
		for _, in := range ins {
			cc, err := d.Apply(in)
			if err != nil {
				return fmt.Errorf("%s: %w", sw.Name, err)
			}
			cmds = append(cmds, cc...)
		}
		changed = append(changed, sw)
		if _, err := t.Pusher.Run(ctx, sw, cmds); err != nil {
			rb := t.rollback(context.WithoutCancel(ctx), changed)
			return errors.Join(fmt.Errorf("push to %s: %w", sw.Name, err), rb)
		}
	}
	for _, sw := range changed {
		t.applied[sw.Name] = want[sw.Name]
	}
	return nil
}

// rollback returns the switches to their previous intents (or the
// dialect's defaults when there were none), the failed one included.
func (t *SwitchTarget) rollback(ctx context.Context, sws []Switch) error {
	var errs []error
	for i := len(sws) - 1; i >= 0; i-- {
		sw := sws[i]
		d, err := t.dialect(sw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var cmds []string
		if prev := t.applied[sw.Name]; len(prev) > 0 {
			for _, in := range prev {
				cc, _ := d.Apply(in)
				cmds = append(cmds, cc...)
			}
		} else {
			want, _ := t.lastWanted(sw)
			for _, in := range want {
				cmds = append(cmds, d.Undo(in)...)
			}
		}
		if _, err := t.Pusher.Run(ctx, sw, cmds); err != nil {
			errs = append(errs, fmt.Errorf("rollback of %s: %w", sw.Name, err))
		}
	}
	return errors.Join(errs...)
}

// lastWanted is what undo should cover for a switch never configured: all
// its ports.
func (t *SwitchTarget) lastWanted(sw Switch) ([]Intent, error) {
	return []Intent{{Switch: sw.Name, Ports: sw.Ports, Prio: sw.Prio, Cell: PaperCell, W: Watermark{Pmax: 1, Alpha: 1}}}, nil
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
	var out string
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
		for _, in := range want[n] {
			txt, err := Render(d, in)
			if err != nil {
				return "", err
			}
			out += fmt.Sprintf("# %s (%s)\n%s\n", n, dn, txt)
		}
	}
	return out, nil
}
