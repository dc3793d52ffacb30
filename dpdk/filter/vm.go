package filter

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/bpf"
)

// vmInsn is a RawInstruction with its jump targets made absolute, so the
// interpreter adds nothing per jump.
type vmInsn struct {
	op     uint16
	jt, jf uint16
	k      uint32
}

func decode(prog []bpf.RawInstruction) []vmInsn {
	out := make([]vmInsn, len(prog))
	for i, ins := range prog {
		v := vmInsn{op: ins.Op, k: ins.K}
		if ins.Op&0x07 == bpfJMP {
			if ins.Op&0xf0 == bpfJA {
				v.jt = uint16(i + 1 + int(ins.K))
			} else {
				v.jt, v.jf = uint16(i+1+int(ins.Jt)), uint16(i+1+int(ins.Jf))
			}
		}
		out[i] = v
	}
	return out
}

// Validate checks a program as the kernel would before attaching it: every
// jump lands inside it, it ends in a return, no division by a constant
// zero, scratch words in range.
func Validate(prog []bpf.RawInstruction) error {
	if len(prog) == 0 || len(prog) > maxInsns {
		return fmt.Errorf("filter: program of %d instructions", len(prog))
	}
	for i, ins := range prog {
		switch ins.Op & 0x07 {
		case bpfJMP:
			if ins.Op&0xf0 == bpfJA {
				if i+1+int(ins.K) >= len(prog) {
					return fmt.Errorf("filter: instruction %d jumps out of the program", i)
				}
			} else if i+1+int(ins.Jt) >= len(prog) || i+1+int(ins.Jf) >= len(prog) {
				return fmt.Errorf("filter: instruction %d jumps out of the program", i)
			}
		case bpfALU:
			if (ins.Op&0xf0 == bpfDIV || ins.Op&0xf0 == bpfMOD) && ins.Op&bpfX == 0 && ins.K == 0 {
				return fmt.Errorf("filter: instruction %d divides by zero", i)
			}
		}
		if (ins.Op == bpfST || ins.Op == bpfST|1 || ins.Op == bpfLD|bpfMEM || ins.Op == bpfLDX|bpfMEM) && ins.K >= memWords {
			return fmt.Errorf("filter: instruction %d uses scratch word %d", i, ins.K)
		}
	}
	if last := prog[len(prog)-1]; last.Op&0x07 != bpfRET {
		return fmt.Errorf("filter: program does not end in a return")
	}
	return nil
}

// Match runs the wire program on a frame and returns how many bytes of it
// to keep: 0 rejects it. wireLen is the frame's length on the wire (len in
// expressions); pkt may be shorter when it was cut to a snap length.
func (p *Program) Match(pkt []byte, wireLen int) int {
	if p.All {
		return DefaultSnapLen
	}
	return int(run(p.vm, pkt, uint32(wireLen)))
}

// Run runs any classic BPF program on pkt as the kernel would, except that
// Linux's ancillary loads fail (they reject the frame). It decodes the
// program on every call: a hot path compiles once and calls Match.
func Run(prog []bpf.RawInstruction, pkt []byte, wireLen int) int {
	return int(run(decode(prog), pkt, uint32(wireLen)))
}

func run(prog []vmInsn, pkt []byte, wireLen uint32) uint32 {
	var a, x uint32
	var mem [memWords]uint32
	n := uint32(len(pkt))
	for pc := 0; pc < len(prog); {
		ins := &prog[pc]
		pc++
		switch ins.op {
		case bpfLD | bpfW | bpfABS:
			k := ins.k
			if k > n || n-k < 4 {
				return 0
			}
			a = binary.BigEndian.Uint32(pkt[k:])
		case bpfLD | bpfH | bpfABS:
			k := ins.k
			if k > n || n-k < 2 {
				return 0
			}
			a = uint32(binary.BigEndian.Uint16(pkt[k:]))
		case bpfLD | bpfB | bpfABS:
			if ins.k >= n {
				return 0
			}
			a = uint32(pkt[ins.k])
		case bpfLD | bpfW | bpfIND:
			k := uint64(x) + uint64(ins.k)
			if k+4 > uint64(n) {
				return 0
			}
			a = binary.BigEndian.Uint32(pkt[k:])
		case bpfLD | bpfH | bpfIND:
			k := uint64(x) + uint64(ins.k)
			if k+2 > uint64(n) {
				return 0
			}
			a = uint32(binary.BigEndian.Uint16(pkt[k:]))
		case bpfLD | bpfB | bpfIND:
			k := uint64(x) + uint64(ins.k)
			if k >= uint64(n) {
				return 0
			}
			a = uint32(pkt[k])
		case bpfLD | bpfW | bpfLEN:
			a = wireLen
		case bpfLD | bpfIMM:
			a = ins.k
		case bpfLD | bpfMEM:
			a = mem[ins.k&(memWords-1)]
		case bpfLDX | bpfW | bpfIMM:
			x = ins.k
		case bpfLDX | bpfW | bpfLEN:
			x = wireLen
		case bpfLDX | bpfW | bpfMEM:
			x = mem[ins.k&(memWords-1)]
		case bpfLDX | bpfB | bpfMSH:
			if ins.k >= n {
				return 0
			}
			x = uint32(pkt[ins.k]&0xf) << 2
		case bpfST:
			mem[ins.k&(memWords-1)] = a
		case bpfST | 1: // STX
			mem[ins.k&(memWords-1)] = x
		case bpfALU | bpfADD | bpfK:
			a += ins.k
		case bpfALU | bpfSUB | bpfK:
			a -= ins.k
		case bpfALU | bpfMUL | bpfK:
			a *= ins.k
		case bpfALU | bpfDIV | bpfK:
			if ins.k == 0 {
				return 0
			}
			a /= ins.k
		case bpfALU | bpfMOD | bpfK:
			if ins.k == 0 {
				return 0
			}
			a %= ins.k
		case bpfALU | bpfAND | bpfK:
			a &= ins.k
		case bpfALU | bpfOR | bpfK:
			a |= ins.k
		case bpfALU | bpfXOR | bpfK:
			a ^= ins.k
		case bpfALU | bpfLSH | bpfK:
			a = shl(a, ins.k)
		case bpfALU | bpfRSH | bpfK:
			a = shr(a, ins.k)
		case bpfALU | bpfADD | bpfX:
			a += x
		case bpfALU | bpfSUB | bpfX:
			a -= x
		case bpfALU | bpfMUL | bpfX:
			a *= x
		case bpfALU | bpfDIV | bpfX:
			if x == 0 {
				return 0
			}
			a /= x
		case bpfALU | bpfMOD | bpfX:
			if x == 0 {
				return 0
			}
			a %= x
		case bpfALU | bpfAND | bpfX:
			a &= x
		case bpfALU | bpfOR | bpfX:
			a |= x
		case bpfALU | bpfXOR | bpfX:
			a ^= x
		case bpfALU | bpfLSH | bpfX:
			a = shl(a, x)
		case bpfALU | bpfRSH | bpfX:
			a = shr(a, x)
		case bpfALU | bpfNEG:
			a = -a
		case bpfJMP | bpfJA:
			pc = int(ins.jt)
		case bpfJMP | bpfJEQ | bpfK:
			pc = pick(a == ins.k, ins)
		case bpfJMP | bpfJGT | bpfK:
			pc = pick(a > ins.k, ins)
		case bpfJMP | bpfJGE | bpfK:
			pc = pick(a >= ins.k, ins)
		case bpfJMP | bpfJSET | bpfK:
			pc = pick(a&ins.k != 0, ins)
		case bpfJMP | bpfJEQ | bpfX:
			pc = pick(a == x, ins)
		case bpfJMP | bpfJGT | bpfX:
			pc = pick(a > x, ins)
		case bpfJMP | bpfJGE | bpfX:
			pc = pick(a >= x, ins)
		case bpfJMP | bpfJSET | bpfX:
			pc = pick(a&x != 0, ins)
		case bpfRET | bpfK:
			return ins.k
		case bpfRET | 0x10: // BPF_A
			return a
		case bpfMISC | bpfTAX:
			x = a
		case bpfMISC | bpfTXA:
			a = x
		default:
			return 0 // an instruction the kernel would have refused
		}
	}
	return 0
}

func pick(c bool, ins *vmInsn) int {
	if c {
		return int(ins.jt)
	}
	return int(ins.jf)
}

// Shifts by 32 or more give 0, as on the kernel's interpreters.
func shl(a, s uint32) uint32 {
	if s >= 32 {
		return 0
	}
	return a << s
}

func shr(a, s uint32) uint32 {
	if s >= 32 {
		return 0
	}
	return a >> s
}
