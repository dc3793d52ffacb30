package pcap

import (
	"encoding/binary"
	"math/bits"
)

// pcapng block types and option codes used by this package.
const (
	blockTypeIDB = 0x00000001
	blockTypeOPB = 0x00000002 // obsolete Packet Block
	blockTypeSPB = 0x00000003
	blockTypeEPB = 0x00000006
	blockTypeISB = 0x00000005

	optEndOfOpt      = 0
	optComment       = 1
	optShbUserAp     = 4
	optIfName        = 2
	optIfDescription = 3
	optIfFilter      = 11

	optIsbStartTime    = 2
	optIsbEndTime      = 3
	optIsbIfRecv       = 4
	optIsbIfDrop       = 5
	optIsbFilterAccept = 6
	optIsbOSDrop       = 7
	optIsbUsrDeliv     = 8
	optIfTsresol       = 9
	optIfTsoff         = 14
	optEpbFlags        = 2 // pack_flags in an OPB has the same code and layout

	shbMinLen = 28 // type, len, BOM, version, section length, trailer
	idbMinLen = 20
	epbMinLen = 32
	opbMinLen = 32
	spbMinLen = 16
)

// tsConv converts one interface's raw 64-bit timestamps to nanoseconds.
// It is precomputed per interface so the per-packet cost is one multiply
// (or divide) for decimal resolutions.
type tsConv struct {
	pow2 bool
	n    uint8  // exponent of the resolution
	mul  uint64 // decimal, n <= 9: 10^(9-n)
	div  uint64 // decimal, n > 9: 10^(n-9); 0 when that overflows (result is 0)
	off  int64  // if_tsoffset in nanoseconds
}

func newTsConv(resol uint8, offsetSec int64) tsConv {
	c := tsConv{pow2: resol&0x80 != 0, n: resol & 0x7f, off: offsetSec * 1e9}
	if !c.pow2 {
		p := uint64(1)
		if c.n <= 9 {
			for i := c.n; i < 9; i++ {
				p *= 10
			}
			c.mul = p
		} else {
			for i := uint8(9); i < c.n; i++ {
				hi, lo := bits.Mul64(p, 10)
				if hi != 0 {
					p = 0 // 10^(n-9) > 2^64: every timestamp rounds to 0
					break
				}
				p = lo
			}
			c.div = p
		}
	}
	return c
}

func (c *tsConv) nanos(ts uint64) int64 {
	if !c.pow2 {
		if c.mul != 0 {
			return int64(ts*c.mul) + c.off
		}
		if c.div == 0 {
			return c.off
		}
		return int64(ts/c.div) + c.off
	}
	// Binary fractions: split into whole seconds and a fraction so the
	// fraction can be scaled exactly with a 128-bit product.
	n := uint(c.n)
	switch {
	case n == 0:
		return int64(ts*1e9) + c.off
	case n < 64:
		sec, frac := ts>>n, ts&(1<<n-1)
		hi, lo := bits.Mul64(frac, 1e9)
		return int64(sec*1e9+(hi<<(64-n)|lo>>n)) + c.off
	default:
		hi, _ := bits.Mul64(ts, 1e9)
		return int64(hi>>(n-64)) + c.off
	}
}

// optIter walks a pcapng options area.
type optIter struct {
	r    *Reader
	b    []byte
	base int64 // stream offset of b[0], for errors
}

// next returns the next option. done is true at opt_endofopt or when the
// area is exhausted (some writers omit opt_endofopt, which is harmless).
func (it *optIter) next() (code uint16, val []byte, done bool, err error) {
	if len(it.b) < 4 {
		return 0, nil, true, nil
	}
	code, n := it.r.u16(it.b), int(it.r.u16(it.b[2:]))
	if code == optEndOfOpt {
		return 0, nil, true, nil
	}
	if 4+n > len(it.b) {
		return 0, nil, false, formatErr(ErrBadLength, it.base,
			"option %d length %d overruns its block (%d bytes left)", code, n, len(it.b)-4)
	}
	val = it.b[4 : 4+n : 4+n]
	adv := min(4+(n+3)&^3, len(it.b))
	it.b = it.b[adv:]
	it.base += int64(adv)
	return code, val, false, nil
}

// readSHB reads a Section Header Block at r.off, which starts a new section
// with its own byte order and an empty interface table.
func (r *Reader) readSHB() error {
	h, err := r.br.Peek(12)
	if err != nil {
		return r.peekErr(len(h), err, "section header", false)
	}
	switch binary.LittleEndian.Uint32(h[8:]) {
	case pcapngBOM:
		r.be = false
	case 0x4d3c2b1a:
		r.be = true
	default:
		return formatErr(ErrBadMagic, r.off, "pcapng byte-order magic % x", h[8:12])
	}
	blen := r.u32(h[4:])
	if blen < shbMinLen || blen%4 != 0 || blen > maxBlockLen {
		return formatErr(ErrBadLength, r.off, "section header length %d", blen)
	}
	b, err := r.br.Peek(int(blen))
	if err != nil {
		return r.peekErr(len(b), err, "section header", false)
	}
	if t := r.u32(b[blen-4:]); t != blen {
		return formatErr(ErrBadLength, r.off, "section header trailer length %d != %d", t, blen)
	}
	if major := r.u16(b[12:]); major != 1 {
		return formatErr(ErrBadVersion, r.off, "pcapng version %d.%d", major, r.u16(b[14:]))
	}
	// The section length (b[16:24]) is ignored: writers commonly leave it
	// at -1 and a streaming reader has no use for it.
	it := optIter{r: r, b: b[24 : blen-4], base: r.off + 24}
	for {
		_, _, done, err := it.next()
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	// A fresh slice rather than [:0]: callers may still hold the previous
	// section's Interfaces().
	r.ifaces, r.conv = nil, nil
	r.sections++
	r.consume(int(blen))
	return nil
}

func (r *Reader) nextNG(rec *Record) error {
	for {
		h, err := r.br.Peek(8)
		if err != nil {
			return r.peekErr(len(h), err, "block header", true)
		}
		btype := r.u32(h)
		if btype == blockTypeSHB {
			if err := r.readSHB(); err != nil {
				return err
			}
			continue
		}
		blen := r.u32(h[4:])
		if blen < 12 || blen%4 != 0 {
			return formatErr(ErrBadLength, r.off, "block type %#x length %d", btype, blen)
		}
		switch btype {
		case blockTypeIDB, blockTypeEPB, blockTypeSPB, blockTypeOPB:
		default:
			// Name resolution, statistics, decryption secrets, custom
			// blocks...: skipped without buffering, so their size does not
			// matter.
			if err := r.skipBlock(blen); err != nil {
				return err
			}
			continue
		}
		if blen > maxBlockLen {
			return formatErr(ErrBadLength, r.off, "block type %#x length %d exceeds %d", btype, blen, maxBlockLen)
		}
		b, err := r.br.Peek(int(blen))
		if err != nil {
			return r.peekErr(len(b), err, "block", false)
		}
		if t := r.u32(b[blen-4:]); t != blen {
			return formatErr(ErrBadLength, r.off, "block type %#x trailer length %d != %d", btype, t, blen)
		}
		switch btype {
		case blockTypeIDB:
			if err := r.parseIDB(b); err != nil {
				return err
			}
			r.consume(len(b))
			continue
		case blockTypeEPB:
			err = r.parseEPB(b, rec)
		case blockTypeOPB:
			err = r.parseOPB(b, rec)
		case blockTypeSPB:
			err = r.parseSPB(b, rec)
		}
		if err != nil {
			return err
		}
		r.consume(len(b))
		return nil
	}
}

// skipBlock discards a block of length blen at r.off and checks its trailer.
func (r *Reader) skipBlock(blen uint32) error {
	start := r.off
	rest := int(blen) - 4
	for rest > 0 {
		n, err := r.br.Discard(min(rest, 1<<30))
		r.off += int64(n)
		rest -= n
		if err != nil {
			off := r.off
			r.off = start
			e := r.peekErr(int(blen)-4-rest, err, "skipped block", false)
			r.off = off
			return e
		}
	}
	t, err := r.br.Peek(4)
	if err != nil {
		return r.peekErr(len(t), err, "block trailer", false)
	}
	if got := r.u32(t); got != blen {
		return formatErr(ErrBadLength, start, "block trailer length %d != %d", got, blen)
	}
	r.consume(4)
	return nil
}

func (r *Reader) parseIDB(b []byte) error {
	if len(b) < idbMinLen {
		return formatErr(ErrBadLength, r.off, "interface description length %d", len(b))
	}
	if len(r.ifaces) >= maxInterfaces {
		return formatErr(ErrBadInterface, r.off, "more than %d interfaces in a section", maxInterfaces)
	}
	ifc := Interface{
		LinkType: LinkType(r.u16(b[8:])),
		SnapLen:  int(r.u32(b[12:])),
		TsResol:  6,
	}
	it := optIter{r: r, b: b[16 : len(b)-4], base: r.off + 16}
	for {
		code, val, done, err := it.next()
		if err != nil {
			return err
		}
		if done {
			break
		}
		switch code {
		case optIfName:
			for len(val) > 0 && val[len(val)-1] == 0 { // some writers NUL-terminate
				val = val[:len(val)-1]
			}
			ifc.Name = string(val[:min(len(val), maxIfNameLen)])
		case optIfTsresol:
			if len(val) >= 1 {
				ifc.TsResol = val[0]
			}
		case optIfTsoff:
			if len(val) == 8 {
				ifc.TsOffset = int64(r.u64(val))
			}
		}
	}
	r.ifaces = append(r.ifaces, ifc)
	r.conv = append(r.conv, newTsConv(ifc.TsResol, ifc.TsOffset))
	return nil
}

// packetCommon validates and fills the fields shared by EPB and OPB, whose
// layouts differ only in the interface/drops words at offset 8.
// The caller has checked len(b) >= epbMinLen (== opbMinLen).
func (r *Reader) packetCommon(b []byte, ifid uint32, rec *Record, what string) error {
	if ifid >= uint32(len(r.ifaces)) {
		return formatErr(ErrBadInterface, r.off, "%s refers to interface %d of %d", what, ifid, len(r.ifaces))
	}
	ifc := &r.ifaces[ifid]
	caplen, origlen := r.u32(b[20:]), r.u32(b[24:])
	if caplen > MaxSnapLen {
		return formatErr(ErrBadLength, r.off, "caplen %d exceeds maximum %d", caplen, MaxSnapLen)
	}
	if ifc.SnapLen != 0 && int64(caplen) > int64(ifc.SnapLen) {
		return formatErr(ErrBadLength, r.off, "caplen %d exceeds interface %d snaplen %d", caplen, ifid, ifc.SnapLen)
	}
	end := 28 + int(caplen)
	if end > len(b)-4 {
		return formatErr(ErrBadLength, r.off, "caplen %d overruns %s of length %d", caplen, what, len(b))
	}
	ts := uint64(r.u32(b[12:]))<<32 | uint64(r.u32(b[16:]))
	*rec = Record{
		Timestamp: r.conv[ifid].nanos(ts),
		CapLen:    int(caplen),
		OrigLen:   int(origlen),
		Interface: int(ifid),
		LinkType:  ifc.LinkType,
		Data:      b[28:end:end],
	}
	// Data is padded to 4 bytes; the block length is a multiple of 4, so
	// the padded end never passes the trailer.
	optStart := (end + 3) &^ 3
	it := optIter{r: r, b: b[optStart : len(b)-4], base: r.off + int64(optStart)}
	for {
		code, val, done, err := it.next()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		switch code {
		case optEpbFlags:
			if len(val) == 4 {
				rec.Flags = r.u32(val)
			}
		case optComment:
			if rec.Comment == nil {
				rec.Comment = val
			}
		}
	}
}

func (r *Reader) parseEPB(b []byte, rec *Record) error {
	if len(b) < epbMinLen {
		return formatErr(ErrBadLength, r.off, "enhanced packet block length %d", len(b))
	}
	return r.packetCommon(b, r.u32(b[8:]), rec, "enhanced packet block")
}

func (r *Reader) parseOPB(b []byte, rec *Record) error {
	if len(b) < opbMinLen {
		return formatErr(ErrBadLength, r.off, "packet block length %d", len(b))
	}
	// Interface ID is 16 bits here, followed by a 16-bit drops count.
	return r.packetCommon(b, uint32(r.u16(b[8:])), rec, "packet block")
}

func (r *Reader) parseSPB(b []byte, rec *Record) error {
	if len(b) < spbMinLen {
		return formatErr(ErrBadLength, r.off, "simple packet block length %d", len(b))
	}
	if len(r.ifaces) == 0 {
		return formatErr(ErrBadInterface, r.off, "simple packet block before any interface")
	}
	ifc := &r.ifaces[0]
	origlen := r.u32(b[8:])
	// An SPB has no captured-length field: it is the original length cut
	// to the interface snap length, and must fit the block.
	caplen := uint64(origlen)
	if ifc.SnapLen != 0 {
		caplen = min(caplen, uint64(ifc.SnapLen))
	}
	if room := uint64(len(b) - spbMinLen); caplen > room {
		caplen = room
	}
	if caplen > MaxSnapLen {
		return formatErr(ErrBadLength, r.off, "caplen %d exceeds maximum %d", caplen, MaxSnapLen)
	}
	end := 12 + int(caplen)
	*rec = Record{
		CapLen:   int(caplen),
		OrigLen:  int(origlen),
		LinkType: ifc.LinkType,
		Data:     b[12:end:end],
	}
	return nil
}
