package capture

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/verbs/roce"
)

// RoCEFields are the fields a RoCE filter knows, in the order its error
// messages list them.
var RoCEFields = []string{"qpn", "opcode", "psn", "ecn", "cnp", "nak", "icrc-bad", "src-gid", "dst-gid", "gid"}

// RoCEError is a RoCE filter that does not parse: Pos is the byte offset.
type RoCEError struct {
	Expr string
	Pos  int
	Msg  string
}

func (e *RoCEError) Error() string {
	return fmt.Sprintf("roce filter: %s at column %d: %q", e.Msg, e.Pos+1, e.Expr)
}

// RoCEFilter is a parsed RoCE filter: predicates on RoCEv2 headers joined
// with and, or, not and parentheses, such as
//
//	qpn 0x11 and opcode "RC RDMA WRITE Only" and psn 100-200
//	(cnp or nak or ecn) and not src-gid 10.0.0.1
//	icrc-bad
//
// qpn and psn take a number or a range LOW-HIGH; opcode a number or a name
// as Wireshark or verbs/roce spell it (any case, quoted when it has
// spaces); ecn a codepoint (0-3, not-ect, ect1, ect0, ce; CE alone); gids an
// IPv4 or IPv6 address. Match evaluates it on the header views without
// allocating; BPF renders what classic BPF can test (all but icrc-bad) as a
// tcpdump expression for the kernel to drop most other frames first.
type RoCEFilter struct {
	Expr string
	Port uint16
	root rnode
	// needICRC is set when a predicate reads the ICRC.
	needICRC bool
}

type rnode interface {
	eval(p *roce.Packet, frame []byte, icrcBad bool) bool
	// bpf renders the node for IPv4 (v6 false) or IPv6 frames, or "" when
	// BPF cannot tell (the kernel then keeps the frame).
	bpf(v6 bool) string
}

type rAnd struct{ a, b rnode }
type rOr struct{ a, b rnode }
type rNot struct{ a rnode }

func (n rAnd) eval(p *roce.Packet, f []byte, bad bool) bool {
	return n.a.eval(p, f, bad) && n.b.eval(p, f, bad)
}
func (n rOr) eval(p *roce.Packet, f []byte, bad bool) bool {
	return n.a.eval(p, f, bad) || n.b.eval(p, f, bad)
}
func (n rNot) eval(p *roce.Packet, f []byte, bad bool) bool { return !n.a.eval(p, f, bad) }

func (n rAnd) bpf(v6 bool) string {
	a, b := n.a.bpf(v6), n.b.bpf(v6)
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return "(" + a + " and " + b + ")"
}

func (n rOr) bpf(v6 bool) string {
	a, b := n.a.bpf(v6), n.b.bpf(v6)
	if a == "" || b == "" {
		return ""
	}
	return "(" + a + " or " + b + ")"
}

func (n rNot) bpf(v6 bool) string {
	if a := n.a.bpf(v6); a != "" {
		return "not " + a
	}
	return ""
}

// A field of the BTH or AETH compared with a range. kind is the field
// as a number, which eval switches on: a switch on the name compared
// strings for every frame the filter saw.
type rField struct {
	name   string
	kind   fieldKind
	lo, hi uint32
}

type fieldKind uint8

const (
	fieldQPN fieldKind = iota
	fieldOpcode
	fieldPSN
	fieldECN
)

var fieldKinds = map[string]fieldKind{"qpn": fieldQPN, "opcode": fieldOpcode, "psn": fieldPSN, "ecn": fieldECN}

// newField is the predicate lo <= name <= hi; name is one of fieldKinds.
func newField(name string, lo, hi uint32) rField {
	k, ok := fieldKinds[name]
	if !ok {
		panic("capture: no RoCE field " + name) // the parser names only these
	}
	return rField{name: name, kind: k, lo: lo, hi: hi}
}

func (n rField) eval(p *roce.Packet, _ []byte, _ bool) bool {
	var v uint32
	switch n.kind {
	case fieldQPN:
		v = p.DestQP
	case fieldOpcode:
		v = uint32(p.Opcode)
	case fieldPSN:
		v = p.PSN
	default:
		v = uint32(p.ECN)
	}
	return v >= n.lo && v <= n.hi
}

// fieldText is the tcpdump expression reading a field; the BTH is at UDP
// payload offset 0, so at udp[8] over IPv4 and ip6[48] over IPv6 without
// extension headers.
func fieldText(name string, v6 bool) string {
	bth := func(off, size int, mask string) string {
		if v6 {
			return fmt.Sprintf("ip6[%d:%d]%s", 48+off, size, mask)
		}
		return fmt.Sprintf("udp[%d:%d]%s", 8+off, size, mask)
	}
	switch name {
	case "qpn":
		return bth(4, 4, " & 0xffffff")
	case "opcode":
		return bth(0, 1, "")
	case "psn":
		return bth(8, 4, " & 0xffffff")
	case "ecn":
		if v6 {
			return "(ip6[1] & 0x30) >> 4"
		}
		return "ip[1] & 3"
	}
	return ""
}

func (n rField) bpf(v6 bool) string {
	t := fieldText(n.name, v6)
	if n.lo == n.hi {
		return fmt.Sprintf("%s = %d", t, n.lo)
	}
	return fmt.Sprintf("(%s >= %d and %s <= %d)", t, n.lo, t, n.hi)
}

type rNAK struct{}

func (rNAK) eval(p *roce.Packet, f []byte, _ bool) bool {
	a := p.AETH(f)
	return len(a) >= roce.AETHLen && a.Syndrome().IsNAK()
}

func (rNAK) bpf(v6 bool) string {
	// NAKs travel as Acknowledge (RC 0x11, XRC 0xb1) with syndrome 011xxxxx.
	if v6 {
		return "((ip6[48] = 0x11 or ip6[48] = 0xb1) and ip6[60] & 0x60 = 0x60)"
	}
	return "((udp[8] = 0x11 or udp[8] = 0xb1) and udp[20] & 0x60 = 0x60)"
}

type rICRC struct{}

func (rICRC) eval(_ *roce.Packet, _ []byte, bad bool) bool { return bad }
func (rICRC) bpf(bool) string                              { return "" }

type rGID struct {
	dir string // src, dst or "" for either
	gid roce.GID
}

func (n rGID) eval(p *roce.Packet, f []byte, _ bool) bool {
	switch n.dir {
	case "src":
		return p.SrcGID(f) == n.gid
	case "dst":
		return p.DstGID(f) == n.gid
	}
	return p.SrcGID(f) == n.gid || p.DstGID(f) == n.gid
}

func (n rGID) bpf(v6 bool) string {
	if n.gid.IsIPv4() == v6 {
		return "len = 0" // never true: the frame is of the other family
	}
	q := "ip"
	if v6 {
		q = "ip6"
	}
	if n.dir != "" {
		q += " " + n.dir
	}
	return q + " host " + n.gid.String()
}

// ParseRoCE parses a RoCE filter for RoCEv2 on UDP port (4791 when 0).
func ParseRoCE(expr string, port uint16) (*RoCEFilter, error) {
	if port == 0 {
		port = roce.UDPPort
	}
	toks, err := roceLex(expr)
	if err != nil {
		return nil, err
	}
	p := &rparser{expr: expr, toks: toks}
	f := &RoCEFilter{Expr: expr, Port: port}
	if len(toks) == 1 {
		return f, nil // empty: every RoCE frame
	}
	f.root, err = p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.text != "" {
		return nil, p.errAt(t.pos, "unexpected %q", t.text)
	}
	f.needICRC = p.icrc
	return f, nil
}

// Match reports whether frame is RoCEv2 and passes the filter; p is
// scratch the caller keeps (and may read after a match).
func (f *RoCEFilter) Match(frame []byte, p *roce.Packet) bool {
	// A whole frame in the common layouts parses in roce.Parse's one pass,
	// which takes it as ParseTruncated would (verbs/roce's FuzzParse holds
	// that); a frame cut at the snap length needs ParseTruncated.
	if roce.ParsePort(frame, f.Port, p) != nil && roce.ParseTruncated(frame, f.Port, p) != nil {
		return false
	}
	if f.root == nil {
		return true
	}
	bad := false
	if f.needICRC {
		bad = errors.Is(p.VerifyICRC(frame), roce.ErrBadICRC)
	}
	return f.root.eval(p, frame, bad)
}

// BPF is a tcpdump expression that every frame Match accepts also passes
// (RoCEv2 on the port, untagged or with one VLAN tag, and whatever BPF can
// test of the predicates), for the kernel to drop the rest.
func (f *RoCEFilter) BPF() string {
	v4 := fmt.Sprintf("ip and udp dst port %d", f.Port)
	v6 := fmt.Sprintf("ip6 and ip6[6] = 17 and ip6[42:2] = %d", f.Port)
	if f.root != nil {
		if t := f.root.bpf(false); t != "" {
			v4 += " and " + t
		}
		if t := f.root.bpf(true); t != "" {
			v6 += " and " + t
		}
	}
	one := "((" + v4 + ") or (" + v6 + "))"
	return one + " or (vlan and " + one + ")"
}

type rtok struct {
	text string
	pos  int
	str  bool // a quoted string
}

func roceLex(s string) ([]rtok, error) {
	var out []rtok
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '(' || c == ')' || c == '!':
			out = append(out, rtok{text: string(c), pos: i})
			i++
		case c == '&' || c == '|':
			if i+1 < len(s) && s[i+1] == c {
				out = append(out, rtok{text: s[i : i+2], pos: i})
				i += 2
				continue
			}
			return nil, &RoCEError{Expr: s, Pos: i, Msg: fmt.Sprintf("unexpected %q", c)}
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, &RoCEError{Expr: s, Pos: i, Msg: "unterminated string"}
			}
			out = append(out, rtok{text: s[i+1 : i+1+j], pos: i, str: true})
			i += j + 2
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n()!&|\"'", rune(s[j])) {
				j++
			}
			out = append(out, rtok{text: s[i:j], pos: i})
			i = j
		}
	}
	return append(out, rtok{pos: len(s)}), nil
}

type rparser struct {
	expr string
	toks []rtok
	i    int
	icrc bool
}

func (p *rparser) peek() rtok { return p.toks[p.i] }
func (p *rparser) next() rtok {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *rparser) errAt(pos int, format string, a ...any) error {
	return &RoCEError{Expr: p.expr, Pos: pos, Msg: fmt.Sprintf(format, a...)}
}

func (p *rparser) accept(words ...string) bool {
	t := p.peek()
	for _, w := range words {
		if !t.str && t.text == w {
			p.next()
			return true
		}
	}
	return false
}

func (p *rparser) or() (rnode, error) {
	n, err := p.and()
	for err == nil && p.accept("or", "||") {
		var m rnode
		if m, err = p.and(); err == nil {
			n = rOr{n, m}
		}
	}
	return n, err
}

func (p *rparser) and() (rnode, error) {
	n, err := p.not()
	for err == nil && p.accept("and", "&&") {
		var m rnode
		if m, err = p.not(); err == nil {
			n = rAnd{n, m}
		}
	}
	return n, err
}

func (p *rparser) not() (rnode, error) {
	if p.accept("not", "!") {
		n, err := p.not()
		if err != nil {
			return nil, err
		}
		return rNot{n}, nil
	}
	if p.accept("(") {
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.accept(")") {
			return nil, p.errAt(p.peek().pos, "want )")
		}
		return n, nil
	}
	return p.pred()
}

func (p *rparser) pred() (rnode, error) {
	t := p.next()
	if t.text == "" && !t.str {
		return nil, p.errAt(t.pos, "want a field (%s)", strings.Join(RoCEFields, ", "))
	}
	switch t.text {
	case "cnp":
		return newField("opcode", uint32(roce.OpCNP), uint32(roce.OpCNP)), nil
	case "nak":
		return rNAK{}, nil
	case "icrc-bad":
		p.icrc = true
		return rICRC{}, nil
	case "qpn", "psn":
		v := p.next()
		lo, hi, err := parseRange(v.text, roce.QPNMask)
		if err != nil {
			return nil, p.errAt(v.pos, "%s: %v", t.text, err)
		}
		return newField(t.text, lo, hi), nil
	case "opcode":
		v := p.next()
		op, err := parseOpcode(v.text)
		if err != nil {
			return nil, p.errAt(v.pos, "%v", err)
		}
		return newField("opcode", uint32(op), uint32(op)), nil
	case "ecn":
		v := p.peek()
		if cp, ok := ecnNames[strings.ToLower(v.text)]; ok && !v.str {
			p.next()
			return newField("ecn", cp, cp), nil
		}
		if n, err := strconv.ParseUint(v.text, 0, 8); err == nil && n <= 3 {
			p.next()
			return newField("ecn", uint32(n), uint32(n)), nil
		}
		return newField("ecn", 3, 3), nil // ecn alone: marked CE
	case "src-gid", "dst-gid", "gid":
		v := p.next()
		a, err := netip.ParseAddr(v.text)
		if err != nil {
			return nil, p.errAt(v.pos, "%s: %q is not an IPv4 or IPv6 address", t.text, v.text)
		}
		return rGID{dir: strings.TrimSuffix(strings.TrimSuffix(t.text, "-gid"), "gid"), gid: roce.GIDFromAddr(a)}, nil
	}
	return nil, p.errAt(t.pos, "unknown RoCE field %q; known fields: %s", t.text, strings.Join(RoCEFields, ", "))
}

var ecnNames = map[string]uint32{"not-ect": 0, "ect1": 1, "ect0": 2, "ce": 3}

func parseRange(s string, limit uint32) (uint32, uint32, error) {
	one := func(s string) (uint32, error) {
		v, err := strconv.ParseUint(s, 0, 32)
		if err != nil || uint32(v) > limit {
			return 0, fmt.Errorf("%q is not a number of 0..%d", s, limit)
		}
		return uint32(v), nil
	}
	a, b, isRange := strings.Cut(s, "-")
	lo, err := one(a)
	if err != nil || !isRange {
		return lo, lo, err
	}
	hi, err := one(b)
	if err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("range %q runs backwards", s)
	}
	return lo, hi, nil
}

// parseOpcode reads an opcode as a number or a name, Wireshark's or
// verbs/roce's, in any case.
func parseOpcode(s string) (roce.Opcode, error) {
	if v, err := strconv.ParseUint(s, 0, 8); err == nil {
		return roce.Opcode(v), nil
	}
	want := strings.ToLower(strings.Join(strings.Fields(s), " "))
	if want == "cnp" {
		return roce.OpCNP, nil
	}
	for op, name := range wiresharkOpcodes {
		if strings.ToLower(name) == want {
			return roce.Opcode(op), nil
		}
	}
	for op := 0; op < 256; op++ {
		if info := roce.OpcodeInfo(roce.Opcode(op)); info.Valid && strings.ToLower(info.Name) == want {
			return roce.Opcode(op), nil
		}
	}
	// Say which names come close, so a typo is one step from right.
	var near []string
	for op := 0; op < 256; op++ {
		info := roce.OpcodeInfo(roce.Opcode(op))
		for _, name := range []string{wiresharkOpcodes[uint8(op)], info.Name} {
			if info.Valid && name != "" && strings.Contains(strings.ToLower(name), want) {
				near = append(near, strconv.Quote(name))
			}
		}
	}
	sort.Strings(near)
	if len(near) > 0 && len(near) <= 12 {
		return 0, fmt.Errorf("opcode %q is not a name; did you mean %s?", s, strings.Join(near, ", "))
	}
	return 0, fmt.Errorf("opcode %q is not a number or an opcode name such as \"RC RDMA WRITE Only\" or %q", s, wiresharkOpcodes[0x0a])
}
