package filter

// The parser turns an expression into a tree of boolean nodes over a few
// kinds of test. Offsets that depend on VLAN tags are kept symbolic (a
// depth, the number of vlan keywords before the primitive) until code
// generation, because the wire and kernel programs place them differently.

type node interface{ isNode() }

type nAnd struct{ a, b node }
type nOr struct{ a, b node }
type nNot struct{ a node }
type nConst bool

// nEtherType tests the EtherType after depth VLAN tags.
type nEtherType struct {
	depth int
	typ   uint16
}

// nVLAN tests for a VLAN tag at depth (and its VLAN ID when id >= 0).
type nVLAN struct {
	depth int
	id    int
}

// nCmp loads a field, masks it and compares it with k.
type nCmp struct {
	ld   load
	mask uint32 // 0: none
	op   cmpOp
	k    uint32
}

// nRel compares two arithmetic expressions.
type nRel struct {
	l, r arith
	op   cmpOp
}

func (nAnd) isNode()       {}
func (nOr) isNode()        {}
func (nNot) isNode()       {}
func (nConst) isNode()     {}
func (nEtherType) isNode() {}
func (nVLAN) isNode()      {}
func (nCmp) isNode()       {}
func (nRel) isNode()       {}

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opGt
	opGe
	opLt
	opLe
	opSet // (A & k) != 0
)

type loadBase uint8

const (
	baseFrame  loadBase = iota // from the start of the frame
	baseLinkPL                 // from the link-layer payload (after depth tags)
	baseL4                     // from the IPv4 payload: X = IPv4 header length
	baseLen                    // the frame's length on the wire
)

type load struct {
	base  loadBase
	depth int
	off   uint32
	size  int // 1, 2 or 4
}

// arith is an arithmetic expression of a relation.
type arith interface{ isArith() }

type aConst uint32
type aLen struct{}

// aLoad is proto[idx:size]; guard is what the proto qualifier implies
// (the frame must be IP for ip[...], and so on).
type aLoad struct {
	base  loadBase
	depth int
	off   uint32 // added to idx
	idx   arith
	size  int
	guard node
}
type aBin struct {
	op   string
	l, r arith
}
type aNeg struct{ a arith }

func (aConst) isArith() {}
func (aLen) isArith()   {}
func (aLoad) isArith()  {}
func (aBin) isArith()   {}
func (aNeg) isArith()   {}

func and(ns ...node) node { return join(ns, func(a, b node) node { return nAnd{a, b} }, true) }

func or(ns ...node) node { return join(ns, func(a, b node) node { return nOr{a, b} }, false) }

// join folds the non-nil nodes left to right with mk; none gives empty.
func join(ns []node, mk func(a, b node) node, empty nConst) node {
	var out node
	for _, n := range ns {
		switch {
		case n == nil:
		case out == nil:
			out = n
		default:
			out = mk(out, n)
		}
	}
	if out == nil {
		return empty
	}
	return out
}
