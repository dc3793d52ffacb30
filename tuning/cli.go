package tuning

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// cliSpec is how one vendor's interactive CLI talks: its prompts, the
// words of a refused command, the session setup and the way back to the
// base mode from a configuration mode.
type cliSpec struct {
	// prompt matches a whole prompt line; HOST stands for the hostname,
	// learned from the first prompt so that output lines which merely
	// look like prompts do not end a command early.
	prompt string
	// errors are what a refused command prints (the vendor's own words).
	errors []string
	// setup turns paging off and widens the terminal; a failure there is
	// not fatal (the pager is also answered when it shows).
	setup []string
	// enable: a ">" prompt is unprivileged, "enable" lifts it.
	enable bool
	// exitStatus: a shell, where a command's verdict is its exit status.
	exitStatus bool
	// base is what returns to the base mode (privileged exec, user
	// view) from the mode prompt shows.
	base func(prompt string) []step
}

const hostPattern = `[\w.\-@/:]{1,63}`

func (sonic) cli() cliSpec {
	return cliSpec{prompt: `^[\w.\-]{1,32}@HOST:[^\n]{0,200}[$#] ?$`, exitStatus: true, base: func(string) []step { return nil }}
}

// The error words are those the vendors print (and network automation
// tools match on, scrapli's platform definitions among them).
func (eos) cli() cliSpec {
	return cliSpec{prompt: `^HOST(\([^()\s]{1,100}\))?[>#] ?$`,
		errors: []string{"% Invalid input", "% Incomplete command", "% Ambiguous command", "% Error", "% Cannot commit", "% Unavailable command"},
		setup:  []string{"terminal length 0", "terminal width 32767"}, enable: true, base: ciscoBase}
}

func (nxos) cli() cliSpec {
	return cliSpec{prompt: `^HOST(\([^()\s]{1,100}\))?[>#] ?$`,
		errors: []string{"% Invalid command", "% Invalid input", "% Incomplete command", "% Ambiguous command", "% Unknown command", "ERROR:"},
		setup:  []string{"terminal length 0", "terminal width 511"}, enable: true, base: ciscoBase}
}

func ciscoBase(prompt string) []step {
	if strings.Contains(prompt, "(config") {
		return []step{{cmd: "end"}}
	}
	return nil
}

func (vrp) cli() cliSpec {
	return cliSpec{prompt: `^(<HOST>|\[[~*]?HOST(-[^\]]{1,100})?\])$`,
		errors: []string{"Error:"},
		setup:  []string{"screen-length 0 temporary"},
		base: func(prompt string) []step {
			if !strings.HasPrefix(prompt, "[") {
				return nil
			}
			var s []step
			// Uncommitted changes would make "return" ask whether to
			// commit them.
			if strings.HasPrefix(prompt, "[*") {
				s = append(s, step{cmd: "clear configuration candidate"})
			}
			return append(s, step{cmd: "return"})
		}}
}

func (comware) cli() cliSpec {
	return cliSpec{prompt: `^(<HOST>|\[HOST(-[^\]]{1,100})?\])$`,
		errors: []string{"% Unrecognized command", "% Ambiguous command", "% Wrong parameter", "% Incomplete command", "% Too many parameters"},
		setup:  []string{"screen-length disable"},
		base: func(prompt string) []step {
			if strings.HasPrefix(prompt, "[") {
				return []step{{cmd: "return"}}
			}
			return nil
		}}
}

// step is one command of a push; answer is what to reply when it asks
// for confirmation ("[Y/N]").
type step struct {
	cmd    string
	answer string
}

// plan is one switch's push as a transaction.
type plan struct {
	// prepare takes a checkpoint (or opens a session), configures and
	// commits (tentatively where the vendor can).
	prepare []step
	// live is the index of the first prepare step whose failure may
	// have changed the running configuration.
	live int
	// discard cleans up after a failure before live; rollback restores
	// the previous running configuration after one at or after live,
	// and cleans up.
	discard, rollback []step
	// confirm makes the push final: confirm the commit, save to the
	// startup configuration, drop the checkpoint. A failure in its first
	// undoable steps can still be rolled back.
	confirm  []step
	undoable int
	// show prints the running configuration.
	show string
}

// RefusedError is a command a switch refused.
type RefusedError struct {
	Switch, Command, Output string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s refused %q: %s", e.Switch, e.Command, firstLine(strings.TrimSpace(e.Output)))
}

var (
	ansiRE    = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)
	pagerRE   = regexp.MustCompile(`(?i)(--+ ?more ?--+|<--- More --->)\s*$`)
	confirmRE = regexp.MustCompile(`\[\s*[Yy](es)?\s*(/|\()[^\]\n]{0,40}\]\s*[:?]?\s*$`)
)

// cliConn is one interactive shell on a switch: a PTY, the vendor's
// prompts, one command at a time.
type cliConn struct {
	sw      string
	spec    cliSpec
	client  *ssh.Client
	sess    *ssh.Session
	in      io.WriteCloser
	timeout time.Duration
	prompt  *regexp.Regexp
	last    string // the prompt the last command ended at

	mu      sync.Mutex
	buf     []byte
	readErr error
	notify  chan struct{}
}

func newCLIConn(sw string, spec cliSpec, client *ssh.Client, timeout time.Duration) (*cliConn, error) {
	sess, err := client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("%s: session: %w", sw, err)
	}
	// Echo on, as a person's terminal; wide, so nothing wraps.
	modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 115200, ssh.TTY_OP_OSPEED: 115200}
	if err := sess.RequestPty("vt100", 200, 511, modes); err != nil {
		sess.Close()
		return nil, fmt.Errorf("%s: pty: %w", sw, err)
	}
	in, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	if err := sess.Shell(); err != nil {
		sess.Close()
		return nil, fmt.Errorf("%s: shell: %w", sw, err)
	}
	c := &cliConn{sw: sw, spec: spec, client: client, sess: sess, in: in, timeout: timeout, notify: make(chan struct{}, 1)}
	go c.read(out)
	return c, nil
}

func (c *cliConn) read(r io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := r.Read(b)
		c.mu.Lock()
		c.buf = append(c.buf, b[:n]...)
		if err != nil {
			c.readErr = err
		}
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// start waits for the first prompt, learns the hostname from it, gets
// privileges and runs the session setup.
func (c *cliConn) start(ctx context.Context) error {
	pat := c.spec.prompt
	for i := 0; strings.Contains(pat, "HOST"); i++ {
		pat = strings.Replace(pat, "HOST", fmt.Sprintf("(?P<host%d>%s)", i, hostPattern), 1)
	}
	learn := regexp.MustCompile(pat)
	_, last, err := c.wait(ctx, learn, "")
	if err != nil {
		return fmt.Errorf("%s: no prompt: %w", c.sw, err)
	}
	host := ""
	for i, m := range learn.FindStringSubmatch(last) {
		if m != "" && strings.HasPrefix(learn.SubexpNames()[i], "host") {
			host = m
			break
		}
	}
	c.prompt = regexp.MustCompile(strings.ReplaceAll(c.spec.prompt, "HOST", regexp.QuoteMeta(host)))
	c.last = last
	if c.spec.enable && strings.HasSuffix(strings.TrimSpace(last), ">") {
		if _, err := c.Run(ctx, step{cmd: "enable"}); err != nil {
			return err
		}
		if strings.HasSuffix(strings.TrimSpace(c.last), ">") {
			return fmt.Errorf("%s: \"enable\" did not give privileged mode (the user needs privilege 15; enable passwords are not supported)", c.sw)
		}
	}
	for _, s := range c.spec.setup {
		if _, err := c.Run(ctx, step{cmd: s}); err != nil && !errors.As(err, new(*RefusedError)) {
			return err
		}
	}
	return nil
}

// wait reads until the last line is a prompt, answering the pager and
// confirmations (with answer; with "N" and an error when the command was
// not expected to ask). It returns the text before the prompt line.
func (c *cliConn) wait(ctx context.Context, prompt *regexp.Regexp, answer string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var asked string
	for {
		c.mu.Lock()
		text := strings.ReplaceAll(string(c.buf), "\r", "")
		if strings.Contains(text, "\x1b") {
			text = ansiRE.ReplaceAllString(text, "")
		}
		readErr := c.readErr
		nl := strings.LastIndexByte(text, '\n')
		tail := text[nl+1:]
		switch {
		case prompt.MatchString(tail):
			c.buf = c.buf[:0]
			c.mu.Unlock()
			out := ""
			if nl >= 0 {
				out = text[:nl]
			}
			if asked != "" && answer == "" {
				return out, tail, fmt.Errorf("%s asked %q, which the push did not expect (answered N)", c.sw, asked)
			}
			return out, tail, nil
		case pagerRE.MatchString(tail):
			c.buf = c.buf[:len(c.buf)-len(tail)]
			c.mu.Unlock()
			if _, err := io.WriteString(c.in, " "); err != nil {
				return "", "", err
			}
			continue
		case confirmRE.MatchString(tail) && asked == "":
			asked = strings.TrimSpace(tail)
			c.mu.Unlock()
			reply := answer
			if reply == "" {
				reply = "N"
			}
			if _, err := io.WriteString(c.in, reply+"\n"); err != nil {
				return "", "", err
			}
			continue
		}
		c.mu.Unlock()
		if readErr != nil {
			return text, "", fmt.Errorf("%s closed the session: %w", c.sw, readErr)
		}
		select {
		case <-c.notify:
		case <-ctx.Done():
			return text, "", fmt.Errorf("%s: waiting for the prompt after %q: %w", c.sw, firstLine(tail), ctx.Err())
		}
	}
}

// Run sends one command and returns its output (without the echo and the
// prompt); a *RefusedError when the switch printed one of its error words
// or, on a shell, the command exited non-zero.
func (c *cliConn) Run(ctx context.Context, s step) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	c.mu.Lock()
	c.buf = c.buf[:0]
	c.mu.Unlock()
	if _, err := io.WriteString(c.in, s.cmd+"\n"); err != nil {
		return "", fmt.Errorf("%s: write: %w", c.sw, err)
	}
	out, last, err := c.wait(ctx, c.prompt, s.answer)
	if err != nil {
		return out, err
	}
	c.last = last
	out = dropEcho(out, s.cmd)
	for _, e := range c.spec.errors {
		if strings.Contains(out, e) {
			return out, &RefusedError{Switch: c.sw, Command: s.cmd, Output: out}
		}
	}
	if c.spec.exitStatus && s.cmd != "echo $?" {
		rc, err := c.Run(ctx, step{cmd: "echo $?"})
		if err != nil {
			return out, err
		}
		if n, perr := strconv.Atoi(strings.TrimSpace(rc)); perr != nil || n != 0 {
			return out, &RefusedError{Switch: c.sw, Command: s.cmd, Output: fmt.Sprintf("exit status %s: %s", strings.TrimSpace(rc), out)}
		}
	}
	return out, nil
}

// dropEcho removes the terminal's echo of cmd from the front of out.
func dropEcho(out, cmd string) string {
	first, rest, _ := strings.Cut(out, "\n")
	if strings.Contains(first, strings.TrimSpace(cmd)) || strings.TrimSpace(first) == "" {
		return rest
	}
	return out
}

// Prompt is the prompt the session is at.
func (c *cliConn) Prompt() string { return c.last }

// Close ends the shell and the connection.
func (c *cliConn) Close() error {
	c.sess.Close()
	return c.client.Close()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
