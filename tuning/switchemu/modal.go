package switchemu

import (
	"fmt"
	"regexp"
	"strings"
)

// node is a configuration line and the lines under it.
type node struct {
	line string
	key  string // lines with the same key replace each other
	kids []*node
}

func (n *node) clone() *node {
	c := &node{line: n.line, key: n.key}
	for _, k := range n.kids {
		c.kids = append(c.kids, k.clone())
	}
	return c
}

// find is the child whose line is line.
func (n *node) find(line string) *node {
	for _, k := range n.kids {
		if k.line == line {
			return k
		}
	}
	return nil
}

// child finds or creates a section.
func (n *node) child(line string) *node {
	if k := n.find(line); k != nil {
		return k
	}
	k := &node{line: line, key: line}
	n.kids = append(n.kids, k)
	return k
}

// set replaces the line with the same key, or appends.
func (n *node) set(line, key string) {
	for _, k := range n.kids {
		if k.key == key {
			k.line = line
			return
		}
	}
	n.kids = append(n.kids, &node{line: line, key: key})
}

// vendor is what differs between the modal CLIs.
type vendor interface {
	look() look
	rules() []rule
	prompt(sh *modalShell) string
	render(st *modalState, root *node) string
}

// rule is one command: the modes it is valid in, its grammar and what it
// does.
type rule struct {
	in  []string
	re  *regexp.Regexp
	cfg bool // a configuration command: Options.FailOn and Ignore apply
	do  func(sh *modalShell, m []string) reply
}

func r(in string, pattern string, cfg bool, do func(sh *modalShell, m []string) reply) rule {
	return rule{in: strings.Fields(in), re: regexp.MustCompile("^(?:" + pattern + ")$"), cfg: cfg, do: do}
}

// modalState is a modal switch: its running and startup configuration and
// the vendors' transaction state.
type modalState struct {
	o          *Options
	v          vendor
	run, start *node
	// EOS: sessions not committed, and those committed with a timer
	// (the configuration to return to on abort).
	sessions, timers map[string]*node
	// NX-OS checkpoints; Comware configuration files.
	checkpoints, files map[string]*node
	// VRP: the running configuration before an unconfirmed trial commit.
	trial *node
}

// look is a vendor's factory state: its default hostname and ports, the
// global lines and the lines every interface starts with.
type look struct {
	host         string
	ports        []string
	global, port []string
	// base is the mode kind a login starts in; banner what it prints
	// first; unknown the output for a command no mode on the way up
	// knows, bad for a known command with a value the switch refuses.
	base, banner, unknown, bad string
}

func newModal(o *Options, v vendor) *modalState {
	lk := v.look()
	if o.Hostname == "" {
		o.Hostname = lk.host
	}
	if len(o.Ports) == 0 {
		o.Ports = lk.ports
	}
	st := &modalState{o: o, v: v, sessions: map[string]*node{}, timers: map[string]*node{},
		checkpoints: map[string]*node{}, files: map[string]*node{}, run: &node{}}
	for _, l := range lk.global {
		st.run.set(l, l)
	}
	for _, p := range o.Ports {
		n := st.run.child("interface " + p)
		for _, l := range lk.port {
			n.set(l, strings.Fields(l)[0])
		}
	}
	st.start = st.run.clone()
	return st
}

func (st *modalState) running() string { return st.v.render(st, st.run) }
func (st *modalState) startup() string { return st.v.render(st, st.start) }

func (st *modalState) leftovers() []string {
	var out []string
	for n := range st.sessions {
		out = append(out, "configuration session "+n)
	}
	for n := range st.timers {
		out = append(out, "unconfirmed commit of session "+n)
	}
	for n := range st.checkpoints {
		out = append(out, "checkpoint "+n)
	}
	for n := range st.files {
		out = append(out, "file "+n)
	}
	if st.trial != nil {
		out = append(out, "unconfirmed trial commit")
	}
	return out
}

func (st *modalState) hasPort(p string) bool {
	for _, q := range st.o.Ports {
		if q == p {
			return true
		}
	}
	return false
}

// mode is one level of a login's mode stack.
type mode struct {
	kind  string
	node  *node
	label string
}

// modalShell is one login.
type modalShell struct {
	sw    *Switch
	st    *modalState
	modes []mode
	// root is the tree configuration modes edit: the running
	// configuration, an EOS session's copy or VRP's candidate.
	root    *node
	session string
}

func (st *modalState) newShell(sw *Switch) shell {
	return &modalShell{sw: sw, st: st, modes: []mode{{kind: st.v.look().base}}}
}

func (sh *modalShell) banner() string { return sh.st.v.look().banner }
func (sh *modalShell) prompt() string { return sh.st.v.prompt(sh) }
func (sh *modalShell) top() mode      { return sh.modes[len(sh.modes)-1] }
func (sh *modalShell) host() string   { return sh.st.o.Hostname }

// push enters a configuration mode for the section header under the
// current mode's node (the root at the top configuration level).
func (sh *modalShell) push(kind, header, label string) {
	parent := sh.top().node
	if parent == nil {
		parent = sh.root
	}
	sh.modes = append(sh.modes, mode{kind: kind, node: parent.child(header), label: label})
}

// enterConfig opens the top configuration level on root.
func (sh *modalShell) enterConfig(kind string, root *node) {
	sh.root = root
	sh.modes = append(sh.modes[:1], mode{kind: kind, node: root})
}

// set puts a line into the current mode's section.
func (sh *modalShell) set(line, key string) {
	n := sh.top().node
	if n == nil {
		n = sh.root
	}
	n.set(line, key)
}

// pop leaves one mode; toBase leaves them all.
func (sh *modalShell) pop() {
	if len(sh.modes) > 1 {
		sh.modes = sh.modes[:len(sh.modes)-1]
	}
}

func (sh *modalShell) toBase() { sh.modes = sh.modes[:1] }

// enterPort is the action of "interface NAME": the interface must exist
// (missing is what the vendor says when it does not), its mode's prompt
// label is label(NAME).
func enterPort(label func(string) string, missing func(string) string) func(sh *modalShell, m []string) reply {
	return func(sh *modalShell, m []string) reply {
		if !sh.st.hasPort(m[1]) {
			return reply{out: missing(m[1])}
		}
		sh.push("if", m[0], label(m[1]))
		return reply{}
	}
}

// toBase and pop as rules' actions (end, return; exit, quit).
func toBase(sh *modalShell, _ []string) reply {
	sh.toBase()
	return reply{}
}

func pop(sh *modalShell, _ []string) reply {
	sh.pop()
	return reply{}
}

func isBase(kind string) bool { return kind == "exec" || kind == "exec>" || kind == "user" }

func (sh *modalShell) exec(line string) reply {
	if line == "" {
		return reply{}
	}
	v := sh.st.v
	// A command not valid in the current configuration mode is tried in
	// the modes above it, as the vendors' parsers do; the base mode is
	// never a fallback for a configuration mode.
	for i := len(sh.modes) - 1; i >= 0; i-- {
		kind := sh.modes[i].kind
		if i < len(sh.modes)-1 && isBase(kind) {
			break
		}
		for _, ru := range v.rules() {
			if !contains(ru.in, kind) {
				continue
			}
			m := ru.re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if ru.cfg && sh.sw.failOn(line) {
				return reply{out: v.look().bad}
			}
			sh.modes = sh.modes[:i+1]
			if ru.cfg && sh.sw.ignore(line) {
				return reply{}
			}
			return ru.do(sh, m)
		}
	}
	return reply{out: v.look().unknown}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// renderTree writes nodes with indent spaces per level under top; sep is
// printed between top-level sections (and, when inner is set, before a
// nested section, as EOS does).
func renderTree(b *strings.Builder, nodes []*node, depth int, indent func(depth int, parent string) string, parent string, inner string) {
	for _, n := range nodes {
		if depth > 0 && len(n.kids) > 0 && inner != "" {
			b.WriteString(indent(depth, parent) + inner + "\n")
		}
		b.WriteString(indent(depth, parent) + n.line + "\n")
		renderTree(b, n.kids, depth+1, indent, n.line, inner)
	}
}

func spaces(per int) func(int, string) string {
	return func(d int, _ string) string { return strings.Repeat(" ", per*d) }
}

// treeText is a configuration without a vendor's header, to compare two.
func treeText(n *node) string {
	var b strings.Builder
	renderTree(&b, n.kids, 0, spaces(1), "", "")
	return b.String()
}

// out renders reply texts with Printf.
func out(format string, a ...any) reply { return reply{out: fmt.Sprintf(format, a...)} }
