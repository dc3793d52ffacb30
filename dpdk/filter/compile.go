package filter

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// Classic BPF opcodes (linux/filter.h), as x/net/bpf's RawInstruction holds
// them.
const (
	bpfLD   = 0x00
	bpfLDX  = 0x01
	bpfST   = 0x02
	bpfALU  = 0x04
	bpfJMP  = 0x05
	bpfRET  = 0x06
	bpfMISC = 0x07

	bpfW   = 0x00
	bpfH   = 0x08
	bpfB   = 0x10
	bpfIMM = 0x00
	bpfABS = 0x20
	bpfIND = 0x40
	bpfMEM = 0x60
	bpfLEN = 0x80
	bpfMSH = 0xa0

	bpfADD = 0x00
	bpfSUB = 0x10
	bpfMUL = 0x20
	bpfDIV = 0x30
	bpfOR  = 0x40
	bpfAND = 0x50
	bpfLSH = 0x60
	bpfRSH = 0x70
	bpfNEG = 0x80
	bpfMOD = 0x90
	bpfXOR = 0xa0

	bpfJA   = 0x00
	bpfJEQ  = 0x10
	bpfJGT  = 0x20
	bpfJGE  = 0x30
	bpfJSET = 0x40

	bpfK = 0x00
	bpfX = 0x08

	bpfTAX = 0x00
	bpfTXA = 0x80

	// Linux's ancillary loads: SKF_AD_OFF + SKF_AD_VLAN_TAG(_PRESENT).
	skfAdOff            = 0xfffff000
	skfAdVLANTag        = 44
	skfAdVLANTagPresent = 48

	// maxInsns is the kernel's BPF_MAXINSNS.
	maxInsns = 4096
	memWords = 16
)

// DefaultSnapLen is what a match returns when Options.SnapLen is 0: all of
// the frame, as libpcap's default.
const DefaultSnapLen = 262144

// Options shape the compiled programs.
type Options struct {
	// SnapLen is returned for a matching frame: the bytes the kernel
	// copies. 0 means DefaultSnapLen.
	SnapLen int
}

// Program is a compiled filter.
type Program struct {
	// Expr is the expression as given.
	Expr string
	// Wire filters frames with their VLAN tags in place.
	Wire []bpf.RawInstruction
	// Kernel is for SO_ATTACH_FILTER on Linux AF_PACKET sockets.
	Kernel []bpf.RawInstruction
	// All is set when the expression matches every frame (it is empty),
	// so callers can skip running it.
	All bool

	vm []vmInsn
}

// Compile parses expr and compiles it for both views of a frame.
func Compile(expr string, o Options) (*Program, error) {
	n, err := parse(expr)
	if err != nil {
		return nil, err
	}
	return compileNode(expr, n, o)
}

// And compiles the conjunction of two expressions, each parsed on its own
// (so the first's vlan keywords do not move the second's offsets).
func And(a, b string, o Options) (*Program, error) {
	na, err := parse(a)
	if err != nil {
		return nil, err
	}
	nb, err := parse(b)
	if err != nil {
		return nil, err
	}
	expr := a
	switch {
	case a == "":
		expr = b
	case b != "":
		expr = "(" + a + ") and (" + b + ")"
	}
	return compileNode(expr, and(na, nb), o)
}

func compileNode(expr string, n node, o Options) (*Program, error) {
	snap := o.SnapLen
	if snap <= 0 {
		snap = DefaultSnapLen
	}
	p := &Program{Expr: expr}
	if c, ok := simplify(n).(nConst); ok && bool(c) {
		p.All = true
	}
	for _, kernel := range []bool{false, true} {
		g := &gen{kernel: kernel}
		g.emit(bpf.RawInstruction{Op: bpfRET | bpfK, K: 0})
		g.emit(bpf.RawInstruction{Op: bpfRET | bpfK, K: uint32(snap)})
		if _, err := g.cond(n, 1, 0); err != nil {
			return nil, err
		}
		prog := g.program()
		if len(prog) > maxInsns {
			return nil, fmt.Errorf("filter: %q compiles to %d instructions, more than the kernel's %d", expr, len(prog), maxInsns)
		}
		if kernel {
			p.Kernel = prog
		} else {
			p.Wire = prog
		}
	}
	p.vm = decode(p.Wire)
	return p, nil
}

// simplify folds constants, so that an empty expression is recognised.
func simplify(n node) node {
	switch n := n.(type) {
	case nAnd:
		a, b := simplify(n.a), simplify(n.b)
		if c, ok := a.(nConst); ok {
			if c {
				return b
			}
			return c
		}
		if c, ok := b.(nConst); ok && bool(c) {
			return a
		}
		return nAnd{a, b}
	case nNot:
		if c, ok := simplify(n.a).(nConst); ok {
			return !c
		}
	}
	return n
}

// gen builds a program backwards, from its last instruction to its first:
// every jump then goes to an instruction already placed, whose distance is
// known. rev[i] ends up at index len(rev)-1-i, and a label is an index in
// rev.
type gen struct {
	rev     []bpf.RawInstruction
	kernel  bool
	scratch int
}

func (g *gen) emit(ins bpf.RawInstruction) int {
	g.rev = append(g.rev, ins)
	return len(g.rev) - 1
}

// seq places straight-line code (in program order) in front of label.
func (g *gen) seq(code ...bpf.RawInstruction) int {
	for i := len(code) - 1; i >= 0; i-- {
		g.emit(code[i])
	}
	return len(g.rev) - 1
}

func (g *gen) program() []bpf.RawInstruction {
	out := make([]bpf.RawInstruction, len(g.rev))
	for i, ins := range g.rev {
		out[len(g.rev)-1-i] = ins
	}
	return out
}

// near returns a label within a conditional jump's reach (255) of the next
// instruction, placing an unconditional jump to target when it is not.
func (g *gen) near(target int) int {
	if len(g.rev)-target-1 <= 255 {
		return target
	}
	return g.emit(bpf.RawInstruction{Op: bpfJMP | bpfJA, K: uint32(len(g.rev) - target - 1)})
}

// jump places a conditional jump on A (or X) with the given targets.
func (g *gen) jump(op cmpOp, src uint16, k uint32, t, f int) int {
	var code uint16
	switch op {
	case opEq:
		code = bpfJEQ
	case opNe:
		code, t, f = bpfJEQ, f, t
	case opGt:
		code = bpfJGT
	case opGe:
		code = bpfJGE
	case opLt:
		code, t, f = bpfJGE, f, t
	case opLe:
		code, t, f = bpfJGT, f, t
	case opSet:
		code = bpfJSET
	}
	if t == f {
		return t
	}
	t = g.near(t)
	f = g.near(f)
	i := len(g.rev)
	return g.emit(bpf.RawInstruction{Op: bpfJMP | code | src, Jt: uint8(i - t - 1), Jf: uint8(i - f - 1), K: k})
}

// etherTypeOff is where the EtherType after depth tags is read.
func (g *gen) etherTypeOff(depth int) uint32 {
	if g.kernel {
		// The kernel took the outer tag out of the frame.
		return 12 + 4*uint32(max(depth-1, 0))
	}
	return 12 + 4*uint32(depth)
}

func (g *gen) linkPL(depth int) uint32 { return g.etherTypeOff(depth) + 2 }

// cond places the code of n, which continues at t when n holds and at f
// otherwise, and returns its entry label.
func (g *gen) cond(n node, t, f int) (int, error) {
	switch n := n.(type) {
	case nConst:
		if n {
			return t, nil
		}
		return f, nil
	case nAnd:
		b, err := g.cond(n.b, t, f)
		if err != nil {
			return 0, err
		}
		return g.cond(n.a, b, f)
	case nOr:
		b, err := g.cond(n.b, t, f)
		if err != nil {
			return 0, err
		}
		return g.cond(n.a, t, b)
	case nNot:
		return g.cond(n.a, f, t)
	case nEtherType:
		c := nCmp{ld: load{baseFrame, 0, g.etherTypeOff(n.depth), 2}, op: opEq, k: uint32(n.typ)}
		if !g.kernel {
			return g.cond(c, t, f)
		}
		return g.cond(and(g.tagPresent(n.depth > 0), c), t, f)
	case nVLAN:
		return g.vlan(n, t, f)
	case nCmp:
		j := g.jump(n.op, bpfK, n.k, t, f)
		code := g.loadCode(n.ld)
		if n.mask != 0 {
			code = append(code, bpf.RawInstruction{Op: bpfALU | bpfAND | bpfK, K: n.mask})
		}
		if j == t && t == f {
			return t, nil
		}
		return g.seq(code...), nil
	case nRel:
		return g.relation(n, t, f)
	}
	return 0, fmt.Errorf("filter: internal error: node %T", n)
}

// tagPresent is the kernel's "the frame had a VLAN tag" (or not).
func (g *gen) tagPresent(want bool) node {
	op := opEq
	if !want {
		op = opNe
	}
	return nCmp{ld: load{base: baseFrame, off: skfAdOff + skfAdVLANTagPresent, size: 4}, op: op, k: 1}
}

func (g *gen) vlan(n nVLAN, t, f int) (int, error) {
	if g.kernel && n.depth == 0 {
		var id node
		if n.id >= 0 {
			id = nCmp{ld: load{base: baseFrame, off: skfAdOff + skfAdVLANTag, size: 4}, mask: 0xfff, op: opEq, k: uint32(n.id)}
		}
		return g.cond(and(g.tagPresent(true), id), t, f)
	}
	off := g.etherTypeOff(n.depth)
	tpid := load{baseFrame, 0, off, 2}
	var pre, id node
	if g.kernel {
		pre = g.tagPresent(true)
	}
	if n.id >= 0 {
		id = nCmp{ld: load{baseFrame, 0, off + 2, 2}, mask: 0xfff, op: opEq, k: uint32(n.id)}
	}
	isTag := or(nCmp{ld: tpid, op: opEq, k: 0x8100}, nCmp{ld: tpid, op: opEq, k: 0x88a8}, nCmp{ld: tpid, op: opEq, k: 0x9100})
	return g.cond(and(pre, isTag, id), t, f)
}

func sizeBits(size int) uint16 {
	switch size {
	case 1:
		return bpfB
	case 2:
		return bpfH
	}
	return bpfW
}

// loadCode is the code that loads ld into A.
func (g *gen) loadCode(ld load) []bpf.RawInstruction {
	sz := sizeBits(ld.size)
	switch ld.base {
	case baseLen:
		return []bpf.RawInstruction{{Op: bpfLD | bpfW | bpfLEN}}
	case baseLinkPL:
		return []bpf.RawInstruction{{Op: bpfLD | sz | bpfABS, K: g.linkPL(ld.depth) + ld.off}}
	case baseL4:
		pl := g.linkPL(ld.depth)
		return []bpf.RawInstruction{{Op: bpfLDX | bpfB | bpfMSH, K: pl}, {Op: bpfLD | sz | bpfIND, K: pl + ld.off}}
	}
	return []bpf.RawInstruction{{Op: bpfLD | sz | bpfABS, K: ld.off}}
}

// relation compiles l op r, after the guards of the loads in both.
func (g *gen) relation(n nRel, t, f int) (int, error) {
	var guards []node
	collectGuards(n.l, &guards)
	collectGuards(n.r, &guards)
	g.scratch = 0
	var code []bpf.RawInstruction
	var j int
	if k, ok := n.r.(aConst); ok {
		j = g.jump(n.op, bpfK, uint32(k), t, f)
		c, err := g.arith(n.l)
		if err != nil {
			return 0, err
		}
		code = c
	} else {
		j = g.jump(n.op, bpfX, 0, t, f)
		cr, err := g.arith(n.r)
		if err != nil {
			return 0, err
		}
		slot, err := g.slot()
		if err != nil {
			return 0, err
		}
		cl, err := g.arith(n.l)
		if err != nil {
			return 0, err
		}
		code = append(cr, bpf.RawInstruction{Op: bpfST, K: slot})
		code = append(code, cl...)
		code = append(code, bpf.RawInstruction{Op: bpfLDX | bpfMEM, K: slot})
	}
	var entry int
	if j == t && t == f {
		entry = t
	} else {
		entry = g.seq(code...)
	}
	return g.cond(and(guards...), entry, f)
}

func collectGuards(a arith, out *[]node) {
	switch a := a.(type) {
	case aLoad:
		if a.guard != nil {
			*out = append(*out, a.guard)
		}
		collectGuards(a.idx, out)
	case aBin:
		collectGuards(a.l, out)
		collectGuards(a.r, out)
	case aNeg:
		collectGuards(a.a, out)
	}
}

func (g *gen) slot() (uint32, error) {
	if g.scratch == memWords {
		return 0, fmt.Errorf("filter: arithmetic nested too deeply (more than %d intermediate values)", memWords)
	}
	g.scratch++
	return uint32(g.scratch - 1), nil
}

var aluOps = map[string]uint16{"+": bpfADD, "-": bpfSUB, "*": bpfMUL, "/": bpfDIV, "%": bpfMOD,
	"&": bpfAND, "|": bpfOR, "^": bpfXOR, "<<": bpfLSH, ">>": bpfRSH}

// arith returns straight-line code leaving a's value in A. X and the
// scratch words above those in use are free to clobber.
func (g *gen) arith(a arith) ([]bpf.RawInstruction, error) {
	switch a := a.(type) {
	case aConst:
		return []bpf.RawInstruction{{Op: bpfLD | bpfIMM, K: uint32(a)}}, nil
	case aLen:
		return []bpf.RawInstruction{{Op: bpfLD | bpfW | bpfLEN}}, nil
	case aNeg:
		c, err := g.arith(a.a)
		return append(c, bpf.RawInstruction{Op: bpfALU | bpfNEG}), err
	case aBin:
		if k, ok := a.r.(aConst); ok {
			if (a.op == "/" || a.op == "%") && k == 0 {
				return nil, fmt.Errorf("filter: division by zero")
			}
			c, err := g.arith(a.l)
			return append(c, bpf.RawInstruction{Op: bpfALU | aluOps[a.op] | bpfK, K: uint32(k)}), err
		}
		cl, err := g.arith(a.l)
		if err != nil {
			return nil, err
		}
		slot, err := g.slot()
		if err != nil {
			return nil, err
		}
		cr, err := g.arith(a.r)
		if err != nil {
			return nil, err
		}
		g.scratch--
		code := append(cl, bpf.RawInstruction{Op: bpfST, K: slot})
		code = append(code, cr...)
		code = append(code, bpf.RawInstruction{Op: bpfMISC | bpfTAX}, bpf.RawInstruction{Op: bpfLD | bpfMEM, K: slot},
			bpf.RawInstruction{Op: bpfALU | aluOps[a.op] | bpfX})
		return code, nil
	case aLoad:
		sz := sizeBits(a.size)
		var base uint32
		switch a.base {
		case baseLinkPL, baseL4:
			base = g.linkPL(a.depth)
		}
		base += a.off
		if k, ok := a.idx.(aConst); ok {
			switch a.base {
			case baseL4:
				return []bpf.RawInstruction{{Op: bpfLDX | bpfB | bpfMSH, K: g.linkPL(a.depth)}, {Op: bpfLD | sz | bpfIND, K: base + uint32(k)}}, nil
			}
			return []bpf.RawInstruction{{Op: bpfLD | sz | bpfABS, K: base + uint32(k)}}, nil
		}
		code, err := g.arith(a.idx)
		if err != nil {
			return nil, err
		}
		if a.base == baseL4 {
			code = append(code, bpf.RawInstruction{Op: bpfLDX | bpfB | bpfMSH, K: g.linkPL(a.depth)},
				bpf.RawInstruction{Op: bpfALU | bpfADD | bpfX})
		}
		return append(code, bpf.RawInstruction{Op: bpfMISC | bpfTAX}, bpf.RawInstruction{Op: bpfLD | sz | bpfIND, K: base}), nil
	}
	return nil, fmt.Errorf("filter: internal error: arith %T", a)
}
