// Package switchemu is an in-process SSH server that plays a switch's
// command line for tests: SONiC's bash shell with its config commands,
// Arista EOS, Cisco NX-OS, Huawei VRP (CloudEngine, two-phase commit) and
// H3C Comware. Each keeps a running configuration, answers with the
// vendor's prompts as the modes change (leaf1#, leaf1(config-if-Et1)#,
// [~HUAWEI-100GE1/0/1], [H3C-HundredGigE1/0/1], admin@sonic:~$), refuses a
// command given in the wrong mode with the vendor's own error, asks the
// vendor's confirmations, and implements what a push relies on to undo
// itself: EOS configuration sessions with commit timers, NX-OS checkpoints
// and rollback, VRP candidate configuration with trial commits, Comware
// configuration files and replace, SONiC checkpoints and JSON patches.
//
// It is written from the vendors' documentation, independently of the
// dialects in package tuning, so a push that passes here has at least met
// the commands' grammar, modes and transactions as documented.
package switchemu

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Options set up one emulated switch.
type Options struct {
	// Vendor is sonic, eos, nxos, vrp or comware.
	Vendor string
	// Hostname is the switch's name in its prompts (a vendor default when
	// empty).
	Hostname string
	// User and Password are the one login the server accepts.
	User, Password string
	// Ports are the interfaces the switch has (a default set when empty).
	Ports []string
	// FailOn refuses a configuration command (or a SONiC patch operation)
	// that matches it, as a platform that rejects a value; the commands
	// before it have taken effect.
	FailOn *regexp.Regexp
	// Ignore accepts a matching configuration command but changes nothing,
	// as a platform that silently keeps its own value.
	Ignore *regexp.Regexp
}

// Switch is a running emulated switch.
type Switch struct {
	Addr    string
	HostKey ssh.PublicKey

	opts Options
	ln   net.Listener
	wg   sync.WaitGroup

	mu       sync.Mutex
	st       state
	commands []string
	logins   int
}

// state is a vendor's configuration and what it keeps beside it
// (checkpoints, files, sessions).
type state interface {
	// newShell starts one login's shell.
	newShell(sw *Switch) shell
	running() string
	startup() string
	// leftovers are checkpoints, files, sessions or trials a push left.
	leftovers() []string
}

// shell is one login's command interpreter.
type shell interface {
	banner() string
	prompt() string
	// exec runs one line; a question is asked with the reply's ask and
	// the next line goes to then.
	exec(line string) reply
}

type reply struct {
	out  string
	ask  string
	then func(answer string) reply
	bye  bool
}

// Start listens on 127.0.0.1 on a free port.
func Start(o Options) (*Switch, error) {
	st, err := newState(&o)
	if err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Switch{Addr: ln.Addr().String(), HostKey: signer.PublicKey(), opts: o, ln: ln, st: st}
	cfg := &ssh.ServerConfig{PasswordCallback: func(c ssh.ConnMetadata, pass []byte) (*ssh.Permissions, error) {
		if c.User() == o.User && string(pass) == o.Password {
			return nil, nil
		}
		return nil, errors.New("access denied")
	}}
	cfg.AddHostKey(signer)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c, cfg)
			}()
		}
	}()
	return s, nil
}

func newState(o *Options) (state, error) {
	switch o.Vendor {
	case "sonic":
		return newSonic(o), nil
	case "eos":
		return newModal(o, eosVendor{}), nil
	case "nxos":
		return newModal(o, nxosVendor{}), nil
	case "vrp":
		return newModal(o, vrpVendor{}), nil
	case "comware":
		return newModal(o, comwareVendor{}), nil
	}
	return nil, fmt.Errorf("switchemu: vendor %q: sonic, eos, nxos, vrp or comware", o.Vendor)
}

// Close stops the server and waits for its sessions.
func (s *Switch) Close() {
	s.ln.Close()
	s.wg.Wait()
}

// Running is the running configuration as the switch shows it.
func (s *Switch) Running() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.running()
}

// Startup is the saved (startup) configuration.
func (s *Switch) Startup() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.startup()
}

// Leftovers are the checkpoints, files, sessions or trials still on the
// switch.
func (s *Switch) Leftovers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.st.leftovers()
	sort.Strings(l)
	return l
}

// Commands are the lines the switch received, in order.
func (s *Switch) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// Logins counts the SSH logins that reached a shell.
func (s *Switch) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

// KnownHosts is the switch's known_hosts line.
func (s *Switch) KnownHosts() string {
	host, port, _ := net.SplitHostPort(s.Addr)
	return fmt.Sprintf("[%s]:%s %s", host, port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey))))
}

func (s *Switch) serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
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
		s.session(ch, in)
	}
}

// session serves one channel: a PTY, then a shell. Exec requests are
// refused: the emulated CLIs are interactive, as the modal ones are.
func (s *Switch) session(ch ssh.Channel, in <-chan *ssh.Request) {
	defer ch.Close()
	pty := false
	for req := range in {
		switch req.Type {
		case "pty-req":
			pty = true
			req.Reply(true, nil)
		case "shell":
			req.Reply(pty, nil)
			if !pty {
				ch.Write([]byte("a terminal is required\r\n"))
				return
			}
			go ssh.DiscardRequests(in)
			s.mu.Lock()
			s.logins++
			sh := s.st.newShell(s)
			s.mu.Unlock()
			s.interact(ch, sh)
			ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, 0))
			return
		default:
			req.Reply(false, nil)
		}
	}
}

// interact is the terminal: echo what is typed, run each line, print the
// output and the next prompt.
func (s *Switch) interact(ch ssh.Channel, sh shell) {
	write := func(text string) { ch.Write([]byte(strings.ReplaceAll(text, "\n", "\r\n"))) }
	s.mu.Lock()
	write(sh.banner() + sh.prompt())
	s.mu.Unlock()
	var pending func(string) reply
	var line []byte
	buf := make([]byte, 4096)
	lastCR := false
	for {
		n, err := ch.Read(buf)
		if err != nil {
			return
		}
		for _, b := range buf[:n] {
			if b == '\n' && lastCR {
				lastCR = false
				continue
			}
			lastCR = b == '\r'
			if b != '\r' && b != '\n' {
				line = append(line, b)
				continue
			}
			text := string(line)
			line = line[:0]
			write(text + "\n")
			s.mu.Lock()
			var r reply
			if pending != nil {
				r, pending = pending(strings.TrimSpace(text)), nil
			} else {
				s.commands = append(s.commands, text)
				r = sh.exec(strings.TrimSpace(text))
			}
			out := r.out
			if out != "" && !strings.HasSuffix(out, "\n") {
				out += "\n"
			}
			if r.ask != "" {
				write(out + r.ask)
				pending = r.then
			} else {
				write(out + sh.prompt())
			}
			s.mu.Unlock()
			if r.bye {
				return
			}
		}
	}
}

// SetFailOn changes Options.FailOn (nil: refuse nothing).
func (s *Switch) SetFailOn(re *regexp.Regexp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.FailOn = re
}

// failOn and ignore apply the options to a configuration line (the lock
// is held).
func (s *Switch) failOn(line string) bool {
	return s.opts.FailOn != nil && s.opts.FailOn.MatchString(line)
}

func (s *Switch) ignore(line string) bool {
	return s.opts.Ignore != nil && s.opts.Ignore.MatchString(line)
}
