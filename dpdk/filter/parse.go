package filter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Ethernet types and IP protocols the keywords stand for.
const (
	etIPv4 = 0x0800
	etARP  = 0x0806
	etRARP = 0x8035
	etIPv6 = 0x86dd

	ipTCP    = 6
	ipUDP    = 17
	ipICMP   = 1
	ipICMPv6 = 58
	ipSCTP   = 132
	ipv6Frag = 44
)

var protoKeywords = map[string]bool{"ether": true, "ip": true, "ip6": true, "arp": true, "rarp": true,
	"tcp": true, "udp": true, "icmp": true, "icmp6": true, "sctp": true}

var typeKeywords = map[string]bool{"host": true, "net": true, "port": true, "portrange": true, "proto": true}

// namedValues are libpcap's named constants for relations.
var namedValues = map[string]uint32{
	"tcpflags": 13, "tcp-fin": 0x01, "tcp-syn": 0x02, "tcp-rst": 0x04, "tcp-push": 0x08, "tcp-ack": 0x10,
	"tcp-urg": 0x20, "tcp-ece": 0x40, "tcp-cwr": 0x80,
	"icmptype": 0, "icmpcode": 1, "icmp-echoreply": 0, "icmp-unreach": 3, "icmp-sourcequench": 4,
	"icmp-redirect": 5, "icmp-echo": 8, "icmp-routeradvert": 9, "icmp-routersolicit": 10, "icmp-timxceed": 11,
	"icmp-paramprob": 12, "icmp-tstamp": 13, "icmp-tstampreply": 14, "icmp-ireq": 15, "icmp-ireqreply": 16,
	"icmp-maskreq": 17, "icmp-maskreply": 18,
	"icmp6type": 0, "icmp6code": 1,
}

// protoNames are the names after a backslash: ip proto \udp.
var protoNames = map[string]uint32{"ip": etIPv4, "ip6": etIPv6, "arp": etARP, "rarp": etRARP,
	"tcp": ipTCP, "udp": ipUDP, "icmp": ipICMP, "icmp6": ipICMPv6, "sctp": ipSCTP}

const (
	dirDefault = iota // src or dst
	dirSrc
	dirDst
	dirAnd // src and dst
)

// qual are a primitive's qualifiers, kept for the next bare identifier.
type qual struct {
	proto string
	dir   int
	typ   string
}

type parser struct {
	expr  string
	toks  []token
	i     int
	depth int // vlan keywords so far
	last  *qual
	// far is the error that got furthest, reported when backtracking
	// leaves every alternative failed.
	far *SyntaxError
}

func (p *parser) peek() token        { return p.toks[p.i] }
func (p *parser) peekAt(k int) token { return p.toks[min(p.i+k, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) errAt(pos int, format string, a ...any) *SyntaxError {
	e := &SyntaxError{Expr: p.expr, Pos: pos, Msg: fmt.Sprintf(format, a...)}
	if p.far == nil || e.Pos >= p.far.Pos {
		p.far = e
	}
	return e
}

func (p *parser) errTok(t token, format string, a ...any) *SyntaxError {
	return p.errAt(t.pos, format, a...)
}

func (p *parser) is(text string) bool {
	t := p.peek()
	return t.kind != tEOF && t.text == text
}

func (p *parser) accept(texts ...string) bool {
	for _, s := range texts {
		if p.is(s) {
			p.next()
			return true
		}
	}
	return false
}

// parse parses a whole expression; an empty one matches everything.
func parse(expr string) (node, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{expr: expr, toks: toks}
	if p.peek().kind == tEOF {
		return nConst(true), nil
	}
	n, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errTok(t, "syntax error: unexpected %q", t.text)
	}
	return n, nil
}

func (p *parser) parseOr() (node, error) {
	n, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.accept("or", "||") {
		m, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		n = nOr{n, m}
	}
	return n, nil
}

func (p *parser) parseAnd() (node, error) {
	n, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.accept("and", "&&") {
		m, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		n = nAnd{n, m}
	}
	return n, nil
}

func (p *parser) parseNot() (node, error) {
	if p.accept("not", "!") {
		n, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return nNot{n}, nil
	}
	// A relation may start like a primitive or a parenthesised
	// expression: try it first and fall back.
	save, depth := p.i, p.depth
	if p.mayStartArith() {
		// Only a relation starts with a load or len: its error stands.
		committed := p.peek().text == "len" || p.peekAt(1).text == "["
		n, err := p.parseRelation()
		if err == nil || committed {
			return n, err
		}
		p.i, p.depth = save, depth
	}
	if p.accept("(") {
		n, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if !p.accept(")") {
			return nil, p.errTok(p.peek(), "syntax error: want )")
		}
		return n, nil
	}
	n, err := p.parsePrimitive()
	if err != nil && p.far != nil && p.far.Pos > err.(*SyntaxError).Pos {
		return nil, p.far
	}
	return n, err
}

func (p *parser) mayStartArith() bool {
	t := p.peek()
	switch {
	case t.kind == tOp:
		return t.text == "(" || t.text == "-"
	case t.kind != tWord:
		return false
	case t.text == "len":
		return true
	case protoKeywords[t.text] || t.text == "vlan":
		return p.peekAt(1).text == "["
	}
	_, named := namedValues[t.text]
	return named || t.text[0] >= '0' && t.text[0] <= '9'
}

var relOps = map[string]cmpOp{"=": opEq, "==": opEq, "!=": opNe, ">": opGt, ">=": opGe, "<": opLt, "<=": opLe}

func (p *parser) parseRelation() (node, error) {
	l, err := p.parseArith(0)
	if err != nil {
		return nil, err
	}
	t := p.peek()
	op, ok := relOps[t.text]
	if !ok || t.kind != tOp {
		return nil, p.errTok(t, "syntax error: want a comparison (=, !=, <, <=, >, >=)")
	}
	p.next()
	r, err := p.parseArith(0)
	if err != nil {
		return nil, err
	}
	return nRel{l, r, op}, nil
}

// Binary operators by precedence, lowest first, as in libpcap's grammar.
var arithLevels = [][]string{{"|"}, {"^"}, {"&"}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}}

func (p *parser) parseArith(level int) (arith, error) {
	if level == len(arithLevels) {
		return p.parseUnary()
	}
	l, err := p.parseArith(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		found := ""
		if t.kind == tOp {
			for _, o := range arithLevels[level] {
				if t.text == o {
					found = o
				}
			}
		}
		if found == "" {
			return l, nil
		}
		p.next()
		r, err := p.parseArith(level + 1)
		if err != nil {
			return nil, err
		}
		l = aBin{found, l, r}
	}
}

func (p *parser) parseUnary() (arith, error) {
	t := p.next()
	switch {
	case t.kind == tOp && t.text == "-":
		a, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return aNeg{a}, nil
	case t.kind == tOp && t.text == "(":
		a, err := p.parseArith(0)
		if err != nil {
			return nil, err
		}
		if !p.accept(")") {
			return nil, p.errTok(p.peek(), "syntax error: want )")
		}
		return a, nil
	case t.kind != tWord:
		return nil, p.errTok(t, "syntax error: want a number, len or a load such as ip[0]")
	case t.text == "len":
		return aLen{}, nil
	case protoKeywords[t.text] && p.is("["):
		return p.parseLoad(t)
	}
	if v, ok := namedValues[t.text]; ok {
		return aConst(v), nil
	}
	v, err := parseNum(t.text)
	if err != nil {
		return nil, p.errTok(t, "%v", err)
	}
	return aConst(v), nil
}

func parseNum(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	return uint32(v), nil
}

// parseLoad reads proto[expr] or proto[expr:size].
func (p *parser) parseLoad(proto token) (arith, error) {
	p.next() // [
	idx, err := p.parseArith(0)
	if err != nil {
		return nil, err
	}
	size := 1
	if p.accept(":") {
		t := p.next()
		switch t.text {
		case "1", "2", "4":
			size = int(t.text[0] - '0')
		default:
			return nil, p.errTok(t, "load size must be 1, 2 or 4")
		}
	}
	if !p.accept("]") {
		return nil, p.errTok(p.peek(), "syntax error: want ]")
	}
	d := p.depth
	ld := aLoad{idx: idx, size: size, depth: d}
	switch proto.text {
	case "ether":
		ld.base = baseFrame
	case "ip":
		ld.base, ld.guard = baseLinkPL, nEtherType{d, etIPv4}
	case "ip6":
		ld.base, ld.guard = baseLinkPL, nEtherType{d, etIPv6}
	case "arp":
		ld.base, ld.guard = baseLinkPL, nEtherType{d, etARP}
	case "rarp":
		ld.base, ld.guard = baseLinkPL, nEtherType{d, etRARP}
	case "tcp", "udp", "icmp", "sctp":
		// libpcap reads transport headers of IPv4 only, after the IPv4
		// header, and never from a non-first fragment.
		ld.base, ld.guard = baseL4, and(nEtherType{d, etIPv4}, ipProto(d, protoNames[proto.text]), notFragment(d))
	case "icmp6":
		ld.base, ld.off, ld.guard = baseLinkPL, 40, and(nEtherType{d, etIPv6}, nCmp{ld: load{baseLinkPL, d, 6, 1}, op: opEq, k: ipICMPv6})
	}
	return ld, nil
}

func ipProto(d int, proto uint32) node {
	return nCmp{ld: load{baseLinkPL, d, 9, 1}, op: opEq, k: proto}
}

func notFragment(d int) node {
	return nNot{nCmp{ld: load{baseLinkPL, d, 6, 2}, op: opSet, k: 0x1fff}}
}

// ip6Proto is ip6 proto N: the next header, or the one after a fragment
// header.
func ip6Proto(d int, proto uint32) node {
	return or(nCmp{ld: load{baseLinkPL, d, 6, 1}, op: opEq, k: proto},
		and(nCmp{ld: load{baseLinkPL, d, 6, 1}, op: opEq, k: ipv6Frag}, nCmp{ld: load{baseLinkPL, d, 40, 1}, op: opEq, k: proto}))
}

// transport is tcp, udp, icmp6, ...: over IPv4 or IPv6.
func transport(d int, proto uint32) node {
	if proto == ipICMP {
		return and(nEtherType{d, etIPv4}, ipProto(d, proto))
	}
	if proto == ipICMPv6 {
		return and(nEtherType{d, etIPv6}, ip6Proto(d, proto))
	}
	return or(and(nEtherType{d, etIPv4}, ipProto(d, proto)), and(nEtherType{d, etIPv6}, ip6Proto(d, proto)))
}

// parsePrimitive reads [proto] [dir] [type] id, or a keyword primitive.
func (p *parser) parsePrimitive() (node, error) {
	start := p.peek()
	if start.kind != tWord {
		return nil, p.errTok(start, "syntax error: want a primitive such as host, port, ip or a comparison")
	}
	d := p.depth
	switch start.text {
	case "vlan":
		p.next()
		n := nVLAN{depth: d, id: -1}
		if t := p.peek(); t.kind == tWord && t.text[0] >= '0' && t.text[0] <= '9' {
			v, err := parseNum(t.text)
			if err != nil || v > 4095 {
				return nil, p.errTok(t, "VLAN ID %s is not 0..4095", t.text)
			}
			p.next()
			n.id = int(v)
		}
		p.depth++
		return n, nil
	case "less", "greater":
		p.next()
		t := p.next()
		v, err := parseNum(t.text)
		if err != nil {
			return nil, p.errTok(t, "%s wants a length: %v", start.text, err)
		}
		if start.text == "less" {
			return nCmp{ld: load{base: baseLen}, op: opLe, k: v}, nil
		}
		return nCmp{ld: load{base: baseLen}, op: opGe, k: v}, nil
	case "broadcast", "multicast":
		p.next()
		return etherCast(start.text), nil
	}
	var q qual
	explicit := false
	if protoKeywords[start.text] {
		q.proto = start.text
		p.next()
		explicit = true
	}
	if p.is("broadcast") || p.is("multicast") {
		t := p.next()
		return p.castPrimitive(q.proto, t)
	}
	if p.is("src") || p.is("dst") {
		explicit = true
		first := p.next().text
		q.dir = dirSrc
		if first == "dst" {
			q.dir = dirDst
		}
		if (p.is("or") || p.is("and")) && (p.peekAt(1).text == "src" || p.peekAt(1).text == "dst") {
			if p.next().text == "or" {
				q.dir = dirDefault
			} else {
				q.dir = dirAnd
			}
			p.next()
		}
	}
	if t := p.peek(); t.kind == tWord && typeKeywords[t.text] {
		explicit = true
		q.typ = t.text
		p.next()
	}
	if !explicit {
		// A bare identifier inherits the last primitive's qualifiers.
		if p.last == nil {
			return nil, p.errTok(start, "syntax error: %q is not a keyword; did you mean host %s or port %s?", start.text, start.text, start.text)
		}
		q = *p.last
	}
	id := p.peek()
	if id.kind != tWord || protoKeywords[id.text] && q.proto == "" && q.typ == "" && q.dir == dirDefault {
		if q.typ == "" && q.dir == dirDefault && q.proto != "" && q.proto != "ether" {
			// ip, tcp, ...: the protocol alone.
			return protoOnly(q.proto, d), nil
		}
		return nil, p.errTok(id, "syntax error: want an address, port or number after %q", p.toks[max(p.i-1, 0)].text)
	}
	if (id.text == "and" || id.text == "or" || id.text == "not") && q.typ == "" && q.dir == dirDefault && q.proto != "" && q.proto != "ether" {
		return protoOnly(q.proto, d), nil
	}
	p.next()
	qq := q
	p.last = &qq
	return p.build(q, id, d)
}

func protoOnly(proto string, d int) node {
	switch proto {
	case "ip":
		return nEtherType{d, etIPv4}
	case "ip6":
		return nEtherType{d, etIPv6}
	case "arp":
		return nEtherType{d, etARP}
	case "rarp":
		return nEtherType{d, etRARP}
	}
	return transport(d, protoNames[proto])
}

func etherCast(kind string) node {
	if kind == "broadcast" {
		return and(nCmp{ld: load{baseFrame, 0, 2, 4}, op: opEq, k: 0xffffffff}, nCmp{ld: load{baseFrame, 0, 0, 2}, op: opEq, k: 0xffff})
	}
	return nCmp{ld: load{baseFrame, 0, 0, 1}, op: opSet, k: 1}
}

func (p *parser) castPrimitive(proto string, t token) (node, error) {
	d := p.depth
	switch {
	case proto == "" || proto == "ether":
		return etherCast(t.text), nil
	case proto == "ip" && t.text == "multicast":
		return and(nEtherType{d, etIPv4}, nCmp{ld: load{baseLinkPL, d, 16, 1}, op: opGe, k: 224}), nil
	case proto == "ip6" && t.text == "multicast":
		return and(nEtherType{d, etIPv6}, nCmp{ld: load{baseLinkPL, d, 24, 1}, op: opEq, k: 255}), nil
	}
	return nil, p.errTok(t, "%s %s is not supported (ip broadcast needs the interface's netmask)", proto, t.text)
}

// build makes the primitive for qualifiers q and identifier id.
func (p *parser) build(q qual, id token, d int) (node, error) {
	typ := q.typ
	w := id.text
	if typ == "" {
		typ = "host"
	}
	switch typ {
	case "proto":
		v, err := protoValue(w)
		if err != nil {
			return nil, p.errTok(id, "%v", err)
		}
		switch q.proto {
		case "ether":
			return nEtherType{d, uint16(v)}, nil
		case "ip":
			return and(nEtherType{d, etIPv4}, ipProto(d, v)), nil
		case "ip6":
			return and(nEtherType{d, etIPv6}, ip6Proto(d, v)), nil
		case "":
			return or(and(nEtherType{d, etIPv4}, ipProto(d, v)), and(nEtherType{d, etIPv6}, ip6Proto(d, v))), nil
		}
		return nil, p.errTok(id, "'%s proto' is not supported", q.proto)
	case "port", "portrange":
		return p.buildPort(q, typ, id, d)
	case "host", "net":
		return p.buildHost(q, typ, id, d)
	}
	return nil, p.errTok(id, "unknown qualifier %s", typ)
}

func protoValue(w string) (uint32, error) {
	if strings.HasPrefix(w, "\\") {
		if v, ok := protoNames[w[1:]]; ok {
			return v, nil
		}
		return 0, fmt.Errorf("unknown protocol %s", w)
	}
	if v, ok := protoNames[w]; ok {
		return v, nil
	}
	return parseNum(w)
}

func dirCombine(dir int, src, dst node) node {
	switch dir {
	case dirSrc:
		return src
	case dirDst:
		return dst
	case dirAnd:
		return and(src, dst)
	}
	return or(src, dst)
}

func (p *parser) buildPort(q qual, typ string, id token, d int) (node, error) {
	lo, hi, err := portRange(id.text, typ == "portrange")
	if err != nil {
		return nil, p.errTok(id, "%v", err)
	}
	var protos []uint32
	switch q.proto {
	case "":
		protos = []uint32{ipSCTP, ipTCP, ipUDP}
	case "tcp", "udp", "sctp":
		protos = []uint32{protoNames[q.proto]}
	default:
		return nil, p.errTok(id, "illegal qualifier of '%s': %s", typ, q.proto)
	}
	match := func(ld load) node {
		if lo == hi {
			return nCmp{ld: ld, op: opEq, k: lo}
		}
		return and(nCmp{ld: ld, op: opGe, k: lo}, nCmp{ld: ld, op: opLe, k: hi})
	}
	var v4, v6 node
	var pr4, pr6 []node
	for _, pr := range protos {
		pr4 = append(pr4, ipProto(d, pr))
		pr6 = append(pr6, nCmp{ld: load{baseLinkPL, d, 6, 1}, op: opEq, k: pr})
	}
	v6 = and(nEtherType{d, etIPv6}, or(pr6...),
		dirCombine(q.dir, match(load{baseLinkPL, d, 40, 2}), match(load{baseLinkPL, d, 42, 2})))
	v4 = and(nEtherType{d, etIPv4}, or(pr4...), notFragment(d),
		dirCombine(q.dir, match(load{baseL4, d, 0, 2}), match(load{baseL4, d, 2, 2})))
	return or(v6, v4), nil
}

func portRange(w string, isRange bool) (uint32, uint32, error) {
	one := func(s string) (uint32, error) {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil || v > 65535 {
			if n, ok := portNames[s]; ok {
				return n, nil
			}
			return 0, fmt.Errorf("%q is not a port number (0..65535)", s)
		}
		return uint32(v), nil
	}
	if !isRange {
		v, err := one(w)
		return v, v, err
	}
	a, b, ok := strings.Cut(w, "-")
	if !ok {
		return 0, 0, fmt.Errorf("portrange %q: want LOW-HIGH", w)
	}
	lo, err := one(a)
	if err != nil {
		return 0, 0, err
	}
	hi, err := one(b)
	if err != nil {
		return 0, 0, err
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	return lo, hi, nil
}

// portNames are the few service names a RoCE capture uses; others need
// numbers (host and service names are not looked up).
var portNames = map[string]uint32{"roce": 4791, "ssh": 22, "domain": 53, "http": 80, "https": 443}

func (p *parser) buildHost(q qual, typ string, id token, d int) (node, error) {
	w := id.text
	if mac, ok := parseMAC(w); ok {
		if typ != "host" || (q.proto != "" && q.proto != "ether") {
			return nil, p.errTok(id, "a MAC address goes with ether host")
		}
		hi := uint32(mac[0])<<8 | uint32(mac[1])
		lo := uint32(mac[2])<<24 | uint32(mac[3])<<16 | uint32(mac[4])<<8 | uint32(mac[5])
		at := func(off uint32) node {
			return and(nCmp{ld: load{baseFrame, 0, off + 2, 4}, op: opEq, k: lo}, nCmp{ld: load{baseFrame, 0, off, 2}, op: opEq, k: hi})
		}
		return dirCombine(q.dir, at(6), at(0)), nil
	}
	if q.proto == "ether" {
		return nil, p.errTok(id, "%q is not a MAC address", w)
	}
	switch q.proto {
	case "", "ip", "ip6", "arp", "rarp":
	default:
		return nil, p.errTok(id, "'%s' modifier applied to %s", q.proto, typ)
	}
	addr, bits, err := p.parseNet(w, typ, id)
	if err != nil {
		return nil, err
	}
	if addr.Is4() {
		if q.proto == "ip6" {
			return nil, p.errTok(id, "%s is an IPv4 address, not for ip6", w)
		}
		a := addr.As4()
		v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		mask := ^uint32(0)
		if bits < 32 {
			mask = ^uint32(0) << (32 - bits)
		}
		if v&^mask != 0 {
			return nil, p.errTok(id, "non-network bits set in %q", w)
		}
		cmp := func(off uint32) node {
			if bits == 0 {
				return nConst(true) // as libpcap, which loads nothing for a /0
			}
			c := nCmp{ld: load{baseLinkPL, d, off, 4}, op: opEq, k: v}
			if mask != ^uint32(0) {
				c.mask = mask
			}
			return c
		}
		ip := and(nEtherType{d, etIPv4}, dirCombine(q.dir, cmp(12), cmp(16)))
		arpAt := func(typ uint16) node {
			return and(nEtherType{d, typ}, dirCombine(q.dir, cmp(14), cmp(24)))
		}
		switch q.proto {
		case "ip":
			return ip, nil
		case "arp":
			return arpAt(etARP), nil
		case "rarp":
			return arpAt(etRARP), nil
		}
		return or(ip, arpAt(etARP), arpAt(etRARP)), nil
	}
	if q.proto != "" && q.proto != "ip6" {
		return nil, p.errTok(id, "%s is an IPv6 address, not for %s", w, q.proto)
	}
	a := addr.As16()
	at := func(off uint32) node {
		var parts []node
		for i := 0; i < 4; i++ {
			left := bits - 32*i
			if left <= 0 {
				break
			}
			v := uint32(a[4*i])<<24 | uint32(a[4*i+1])<<16 | uint32(a[4*i+2])<<8 | uint32(a[4*i+3])
			c := nCmp{ld: load{baseLinkPL, d, off + uint32(4*i), 4}, op: opEq, k: v}
			if left < 32 {
				c.mask = ^uint32(0) << (32 - left)
			}
			parts = append(parts, c)
		}
		if len(parts) == 0 {
			return nConst(true)
		}
		return and(parts...)
	}
	return and(nEtherType{d, etIPv6}, dirCombine(q.dir, at(8), at(24))), nil
}

// parseNet reads an address with, for net, a prefix length ("/N" or
// "mask M"), or a dotted IPv4 prefix such as 10.1 (a /16).
func (p *parser) parseNet(w, typ string, id token) (netip.Addr, int, error) {
	if typ == "host" {
		a, err := netip.ParseAddr(w)
		if err != nil || a.Zone() != "" {
			return a, 0, p.errTok(id, "%q is not an IP address (host names are not resolved)", w)
		}
		return a.Unmap(), a.Unmap().BitLen(), nil
	}
	a, err := netip.ParseAddr(w)
	bits := -1
	if err != nil {
		// libpcap's dotted prefixes: 10 is 10/8, 10.1 is 10.1/16.
		parts := strings.Split(w, ".")
		if len(parts) > 3 {
			return a, 0, p.errTok(id, "%q is not a network", w)
		}
		var b [4]byte
		for i, s := range parts {
			v, err := strconv.ParseUint(s, 10, 8)
			if err != nil {
				return a, 0, p.errTok(id, "%q is not a network", w)
			}
			b[i] = byte(v)
		}
		a, bits = netip.AddrFrom4(b), 8*len(parts)
	} else {
		a = a.Unmap()
		bits = a.BitLen()
	}
	switch {
	case p.accept("/"):
		t := p.next()
		v, err := strconv.Atoi(t.text)
		if err != nil || v < 0 || v > a.BitLen() {
			return a, 0, p.errTok(t, "prefix length %q: want 0..%d", t.text, a.BitLen())
		}
		bits = v
	case p.is("mask"):
		p.next()
		t := p.next()
		m, err := netip.ParseAddr(t.text)
		if err != nil || !m.Is4() || !a.Is4() {
			return a, 0, p.errTok(t, "mask %q: want a dotted IPv4 mask", t.text)
		}
		mb := m.As4()
		mv := uint32(mb[0])<<24 | uint32(mb[1])<<16 | uint32(mb[2])<<8 | uint32(mb[3])
		ones := 0
		for mv&0x80000000 != 0 {
			ones++
			mv <<= 1
		}
		if mv != 0 {
			return a, 0, p.errTok(t, "mask %q is not contiguous", t.text)
		}
		bits = ones
	}
	return a, bits, nil
}
