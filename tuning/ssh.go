package tuning

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The interactive sessions are our own expect loop on golang.org/x/crypto/ssh
// rather than github.com/scrapli/scrapligo (v1.4.3 on the module proxy),
// which was weighed first. scrapligo's channel and platform files are well
// tried, but for this push the loop here is the more robust one:
//   - cancellation: every read follows the push's context (the tuner's
//     per-evaluation timeout); scrapligo's operations run on their own
//     timeouts and a background context, polling the channel every 250 us;
//   - host keys: scrapligo takes a known_hosts path and skips the check
//     unless told otherwise, and cannot say which key a switch offered; here
//     the check is always on (or explicitly "insecure") and the error names
//     the switch, the key's fingerprint and the file;
//   - prompts: its huawei_vrp definition does not match a CloudEngine's
//     two-phase prompts ([~HOST], [*HOST-100GE1/0/1]) and it has none for
//     SONiC, so every platform would need our own definition anyway, and the
//     transaction (checkpoint, session, trial commit, rollback, verification)
//     is ours in either case;
//   - dependencies: it would add creack/pty, a 2020 pseudo-version of
//     gotextfsm and go-cmp for what is some 250 lines here.
// What we kept from such tools is their knowledge: the vendors' error words
// and paging commands (cliSpec).

// ErrHostKey is a switch whose host key known_hosts does not vouch for.
var ErrHostKey = errors.New("host key not trusted")

// Conn is one interactive configuration session on a switch.
type Conn interface {
	// Run sends one command and returns its output; an error when the
	// switch refused it.
	Run(ctx context.Context, s step) (string, error)
	// Prompt is the prompt the session is at (its mode).
	Prompt() string
	Close() error
}

// Pusher opens configuration sessions on switches.
type Pusher interface {
	Open(ctx context.Context, sw Switch) (Conn, error)
}

// SSHPusher opens one interactive SSH shell (with a PTY) per switch and
// drives it in the switch's dialect.
type SSHPusher struct {
	// HostKeys checks the switch's host key: a known_hosts file's
	// callback, or ssh.InsecureIgnoreHostKey for a lab.
	HostKeys ssh.HostKeyCallback
	// KnownHosts names the file, for messages.
	KnownHosts string
	// Timeout bounds each command (defaultCommandTimeout when zero) and,
	// up to dialTimeout, connecting.
	Timeout time.Duration
}

// NewSSHPusher checks host keys against knownHosts (a known_hosts file);
// "insecure" accepts any key (labs only).
func NewSSHPusher(knownHosts string) (*SSHPusher, error) {
	if knownHosts == "insecure" {
		return &SSHPusher{HostKeys: ssh.InsecureIgnoreHostKey(), KnownHosts: knownHosts}, nil
	}
	cb, err := knownhosts.New(knownHosts)
	if err != nil {
		return nil, fmt.Errorf("ssh: known hosts: %w", err)
	}
	return &SSHPusher{HostKeys: cb, KnownHosts: knownHosts}, nil
}

// defaultCommandTimeout allows for the slow commands of a push: saving
// the startup configuration, SONiC's config updater.
const defaultCommandTimeout = 2 * time.Minute

// dialTimeout bounds reaching a switch and the SSH handshake: an
// unreachable switch should stop a push quickly.
const dialTimeout = 15 * time.Second

func (p *SSHPusher) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return defaultCommandTimeout
}

func (p *SSHPusher) dialTimeout() time.Duration { return min(p.timeout(), dialTimeout) }

func (p *SSHPusher) auth(sw Switch) ([]ssh.AuthMethod, error) {
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
		// Many switch SSH servers ask for the password through
		// keyboard-interactive.
		pw := sw.Password
		auth = append(auth, ssh.Password(pw), ssh.KeyboardInteractive(func(_, _ string, qs []string, _ []bool) ([]string, error) {
			a := make([]string, len(qs))
			for i := range a {
				a[i] = pw
			}
			return a, nil
		}))
	}
	return auth, nil
}

// Open connects, checks the host key, starts the shell and brings it to
// the dialect's base mode with paging off.
func (p *SSHPusher) Open(ctx context.Context, sw Switch) (Conn, error) {
	d, err := DialectByName(sw.Dialect)
	if err != nil {
		return nil, fmt.Errorf("switch %s: %w", sw.Name, err)
	}
	auth, err := p.auth(sw)
	if err != nil {
		return nil, err
	}
	var keyErr error
	check := func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := p.HostKeys(host, remote, key)
		var ke *knownhosts.KeyError
		switch {
		case errors.As(err, &ke) && len(ke.Want) == 0:
			keyErr = fmt.Errorf("%w: switch %s (%s) offered %s key %s, which is not in %s",
				ErrHostKey, sw.Name, host, key.Type(), ssh.FingerprintSHA256(key), p.KnownHosts)
		case errors.As(err, &ke):
			keyErr = fmt.Errorf("%w: switch %s (%s) offered %s key %s, but %s holds another key for it (line %d): refused, a changed key may be an attack",
				ErrHostKey, sw.Name, host, key.Type(), ssh.FingerprintSHA256(key), p.KnownHosts, ke.Want[0].Line)
		case err != nil:
			keyErr = fmt.Errorf("%w: switch %s (%s): %w", ErrHostKey, sw.Name, host, err)
		}
		return keyErr
	}
	cfg := &ssh.ClientConfig{User: sw.User, Auth: auth, HostKeyCallback: check, Timeout: p.dialTimeout()}
	dctx, cancel := context.WithTimeout(ctx, p.dialTimeout())
	defer cancel()
	var dialer net.Dialer
	nc, err := dialer.DialContext(dctx, "tcp", sw.Address)
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %w", ErrUnreachable, sw.Name, sw.Address, err)
	}
	// The handshake has no context of its own: a deadline on the socket
	// stands in for it.
	nc.SetDeadline(time.Now().Add(p.dialTimeout()))
	cc, chans, reqs, err := ssh.NewClientConn(nc, sw.Address, cfg)
	if err != nil {
		nc.Close()
		if keyErr != nil {
			return nil, keyErr
		}
		return nil, fmt.Errorf("%w: %s: ssh: %w", ErrUnreachable, sw.Name, err)
	}
	nc.SetDeadline(time.Time{})
	client := ssh.NewClient(cc, chans, reqs)
	c, err := newCLIConn(sw.Name, d.cli(), client, p.timeout())
	if err != nil {
		client.Close()
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
