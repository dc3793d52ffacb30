package verbstest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rdma-appliance/appliance/verbs"
)

// The randomized RC test: per path MTU, a few batches of random work
// requests of every type between a QP on A and one on B, in both
// directions. Each batch is planned against a model of both buffers (their
// contents before the batch, with each request's effect applied), posted,
// and checked: every completion field, and both buffers byte for byte, so a
// stray write anywhere in them is caught too.

const (
	randBuf     = 2<<20 + 256<<10 // per endpoint: one 1 MiB transfer plus the small ones
	randBatches = 5
	randPerWR   = 8 // requests per batch (fewer when the buffers run out)
	randLarge   = 1 << 20
)

var allOps = []verbs.WROpcode{verbs.WRSend, verbs.WRSendWithImm, verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm,
	verbs.WRRDMARead, verbs.WRAtomicFetchAndAdd, verbs.WRAtomicCmpAndSwp}

func (s *suite) testRCRandom(t *testing.T) {
	for m := verbs.MTU256; m <= verbs.MTU4096; m++ {
		t.Run(m.String(), func(t *testing.T) {
			if m > s.mtu {
				t.Skipf("path MTU %v: the ports' active MTU is %v", m, s.mtu)
			}
			seed := s.seedFor(t, uint64(m))
			r := rand.New(rand.NewPCG(seed, uint64(m)))
			p := s.defaultConn()
			p.mtu = m
			p.psn = [2]uint32{r.Uint32() & 0xffffff, 0xffffff - uint32(r.IntN(64))} // B's wraps soon
			x := s.newEndpoint(t, 0, epOpts{typ: verbs.QPTypeRC, buf: randBuf})
			y := s.newEndpoint(t, 1, epOpts{typ: verbs.QPTypeRC, buf: randBuf})
			s.connect(t, x, y, p)
			// The 1 MiB request of this MTU: each MTU gets another type.
			large := allOps[int(m-verbs.MTU256)%len(allOps)]
			if large.IsAtomic() {
				large = verbs.WRRDMARead
			}
			for b := 0; b < randBatches; b++ {
				req, resp := x, y
				if r.IntN(2) == 1 {
					req, resp = y, x
				}
				var first verbs.WROpcode = 255
				if b == 0 {
					first = large
				}
				bt := newBatch(s, r, req, resp, m.Bytes(), b, first)
				bt.run(t)
			}
		})
	}
}

// piece is a span of a buffer.
type piece struct{ off, n int }

// region is where one request's bytes are in a buffer: one piece per SGE.
type region []piece

func (g region) len() int {
	n := 0
	for _, p := range g {
		n += p.n
	}
	return n
}

// gather reads the region's bytes from b.
func (g region) gather(b []byte) []byte {
	out := make([]byte, 0, g.len())
	for _, p := range g {
		out = append(out, b[p.off:p.off+p.n]...)
	}
	return out
}

// scatter writes data into the region of b, piece by piece.
func (g region) scatter(b, data []byte) {
	for _, p := range g {
		if len(data) == 0 {
			return
		}
		data = data[copy(b[p.off:p.off+p.n], data):]
	}
}

func (g region) sgl(e *endpoint) []verbs.SGE {
	if len(g) == 0 {
		return nil
	}
	out := make([]verbs.SGE, len(g))
	for i, p := range g {
		out[i] = verbs.SGE{Addr: e.mr.Addr() + uint64(p.off), Length: uint32(p.n), LKey: e.mr.LKey()}
	}
	return out
}

// cursor hands out disjoint spans of one buffer.
type cursor struct {
	off, size int
	r         *rand.Rand
}

// take returns a region of n bytes in at most k pieces (k >= 1), with
// random gaps between them, or false when the buffer is full.
func (c *cursor) take(n, k int, align int) (region, bool) {
	if align > 1 {
		c.off = (c.off + align - 1) &^ (align - 1)
	}
	if n == 0 {
		return nil, c.off <= c.size
	}
	k = min(k, n)
	cuts := []int{0, n}
	for len(cuts) < k+1 {
		cuts = append(cuts, 1+c.r.IntN(n-1))
	}
	sortInts(cuts)
	var g region
	off := c.off
	for i := 1; i < len(cuts); i++ {
		l := cuts[i] - cuts[i-1]
		if l == 0 {
			continue
		}
		g = append(g, piece{off, l})
		off += l
		if i < len(cuts)-1 {
			off += c.r.IntN(24)
		}
	}
	if off > c.size {
		return nil, false
	}
	c.off = off + c.r.IntN(64)
	return g, true
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// randSize favours the sizes where segmentation goes wrong (0, 1, around
// one and a few MTUs) and is log-uniform up to 64 KiB otherwise.
func randSize(r *rand.Rand, mtu int) int {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1, 2:
		return []int{1, mtu - 1, mtu, mtu + 1, 2*mtu - 1, 2 * mtu, 3*mtu + 1}[r.IntN(7)]
	}
	return r.IntN(1<<r.IntN(17) + 1)
}

// planned is one request of a batch and what it must do.
type planned struct {
	wr     verbs.SendWR
	n      int
	desc   string
	src    region // the requester's bytes that inline scribbling overwrites
	recv   int    // index of its receive request, or -1
	inline bool
}

type batch struct {
	s           *suite
	r           *rand.Rand
	req, resp   *endpoint
	mtu, num    int
	reqW, respW []byte // the buffers as they must end
	reqC, respC cursor
	wrs         []planned
	recvs       []verbs.RecvWR
	recvWant    []wcWant
	first       verbs.WROpcode
	reply       binary.ByteOrder // of the value an atomic returns
	effects     []func()         // each request's effect on the model
}

// effect records what a request does to the model, applied once the
// buffers hold their random contents.
func (b *batch) effect(f func()) { b.effects = append(b.effects, f) }

func newBatch(s *suite, r *rand.Rand, req, resp *endpoint, mtu, num int, first verbs.WROpcode) *batch {
	b := &batch{s: s, r: r, req: req, resp: resp, mtu: mtu, num: num, first: first, reply: s.env.AtomicReplyOrder}
	if b.reply == nil {
		b.reply = binary.NativeEndian
	}
	b.reqC = cursor{size: len(req.buf), r: r}
	b.respC = cursor{size: len(resp.buf), r: r}
	for _, e := range []*endpoint{req, resp} {
		if e.model == nil {
			e.model = append([]byte(nil), e.buf...)
		}
	}
	b.reqW, b.respW = req.model, resp.model
	return b
}

// fill gives the part of a buffer the batch uses random contents, in the
// buffer and its model alike; the rest keeps what earlier batches left.
func (b *batch) fill(e *endpoint, upto int) {
	upto = min(upto, len(e.buf))
	fillRandom(b.r, e.buf[:upto])
	copy(e.model, e.buf[:upto])
}

func fillRandom(r *rand.Rand, b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, r.Uint64())
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// plan adds one request; it reports false when the buffers are full.
func (b *batch) plan(op verbs.WROpcode, n int) bool {
	r := b.r
	k := len(b.wrs)
	id := uint64(b.num)<<16 | uint64(k) | 0xc0de<<32
	sendSGE, recvSGE := b.req.cap.MaxSendSGE, b.resp.cap.MaxRecvSGE
	readSGE := b.req.cap.MaxSendSGE
	p := planned{wr: verbs.SendWR{ID: id, Opcode: op}, n: n, recv: -1}
	p.desc = fmt.Sprintf("batch %d request %d: %v of %d bytes from %s", b.num, k, op, n, b.req.desc)
	if op.HasImm() {
		p.wr.Imm = r.Uint32()
	}
	switch op {
	case verbs.WRSend, verbs.WRSendWithImm:
		src, ok1 := b.reqC.take(n, 1+r.IntN(sendSGE), 1)
		slack := r.IntN(32)
		dst, ok2 := b.respC.take(n+slack, 1+r.IntN(recvSGE), 1)
		if !ok1 || !ok2 {
			return false
		}
		b.effect(func() { dst.scatter(b.respW, src.gather(b.reqW)) })
		p.wr.SGL, p.src = src.sgl(b.req), src
		p.recv = b.addRecv(id, dst.sgl(b.resp), op, n)
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		src, ok1 := b.reqC.take(n, 1+r.IntN(sendSGE), 1)
		dst, ok2 := b.respC.take(n, 1, 1)
		if !ok1 || !ok2 {
			return false
		}
		b.effect(func() { dst.scatter(b.respW, src.gather(b.reqW)) })
		p.wr.SGL, p.src = src.sgl(b.req), src
		p.wr.RemoteAddr, p.wr.RKey = b.resp.raddr(b.respC.off), b.resp.mr.RKey()
		if len(dst) > 0 {
			p.wr.RemoteAddr = b.resp.raddr(dst[0].off)
		}
		if op == verbs.WRRDMAWriteWithImm {
			// The receive it consumes gets no data: give it a decoy
			// buffer now and then, which must stay untouched.
			var sgl []verbs.SGE
			if r.IntN(2) == 0 {
				if decoy, ok := b.respC.take(16, 1, 1); ok {
					sgl = decoy.sgl(b.resp)
				}
			}
			p.recv = b.addRecv(id, sgl, op, n)
		}
	case verbs.WRRDMARead:
		dst, ok1 := b.reqC.take(n, 1+r.IntN(readSGE), 1)
		src, ok2 := b.respC.take(n, 1, 1)
		if !ok1 || !ok2 {
			return false
		}
		b.effect(func() { dst.scatter(b.reqW, src.gather(b.respW)) })
		p.wr.SGL = dst.sgl(b.req)
		p.wr.RemoteAddr, p.wr.RKey = b.resp.raddr(b.respC.off), b.resp.mr.RKey()
		if len(src) > 0 {
			p.wr.RemoteAddr = b.resp.raddr(src[0].off)
		}
	case verbs.WRAtomicFetchAndAdd, verbs.WRAtomicCmpAndSwp:
		dst, ok1 := b.reqC.take(8, 1, 8)
		word, ok2 := b.respC.take(8, 1, 8)
		if !ok1 || !ok2 {
			return false
		}
		if op == verbs.WRAtomicFetchAndAdd {
			p.wr.CompareAdd = r.Uint64() >> uint(r.IntN(64))
		} else {
			p.wr.CompareAdd, p.wr.Swap = r.Uint64(), r.Uint64()
		}
		equal := r.IntN(2) == 0 // CMP_SWP: compare with the word's value
		b.effect(func() {
			wr := &b.wrs[k].wr
			w := b.respW[word[0].off : word[0].off+8]
			orig := binary.NativeEndian.Uint64(w)
			nw := orig + wr.CompareAdd
			if op == verbs.WRAtomicCmpAndSwp {
				if equal {
					wr.CompareAdd = orig
				}
				nw = orig
				if orig == wr.CompareAdd {
					nw = wr.Swap
				}
			}
			binary.NativeEndian.PutUint64(w, nw)
			b.reply.PutUint64(b.reqW[dst[0].off:], orig)
		})
		p.wr.SGL = dst.sgl(b.req)
		p.wr.RemoteAddr, p.wr.RKey = b.resp.raddr(word[0].off), b.resp.mr.RKey()
	}
	if n > 0 && n <= b.req.cap.MaxInlineData && !isRdAtomic(op) && r.IntN(2) == 0 {
		p.wr.Flags |= verbs.SendInline
		p.inline = true
	}
	if r.IntN(2) == 0 {
		p.wr.Flags |= verbs.SendSignaled
	}
	b.wrs = append(b.wrs, p)
	return true
}

func isRdAtomic(op verbs.WROpcode) bool { return op == verbs.WRRDMARead || op.IsAtomic() }

// addRecv queues the receive a SEND or WRITE with immediate consumes, and
// the completion it must produce.
func (b *batch) addRecv(id uint64, sgl []verbs.SGE, op verbs.WROpcode, n int) int {
	w := wcWant{id: id, status: verbs.WCSuccess, op: verbs.WCRecv, checkN: true, n: uint32(n), qpn: b.resp.qp.QPN()}
	if op == verbs.WRRDMAWriteWithImm {
		w.op = verbs.WCRecvRDMAWithImm
	}
	b.recvs = append(b.recvs, verbs.RecvWR{ID: id, SGL: sgl})
	b.recvWant = append(b.recvWant, w)
	return len(b.recvs) - 1
}

func (b *batch) run(t *testing.T) {
	r := b.r
	// The first batch of an MTU starts with its 1 MiB request and covers
	// every type once; later ones are random.
	ops := make([]verbs.WROpcode, 0, randPerWR)
	if b.first != 255 {
		ops = append(ops, b.first)
		for _, i := range r.Perm(len(allOps)) {
			ops = append(ops, allOps[i])
		}
	}
	for len(ops) < randPerWR {
		ops = append(ops, allOps[r.IntN(len(allOps))])
	}
	for i, op := range ops {
		n := randSize(r, b.mtu)
		if i == 0 && b.first != 255 {
			n = randLarge
		}
		if op.IsAtomic() {
			n = 8
		}
		if !b.plan(op, n) {
			break
		}
	}
	if len(b.wrs) == 0 {
		t.Fatalf("batch %d: nothing fits in the buffers", b.num)
	}
	b.fill(b.req, b.reqC.off)
	b.fill(b.resp, b.respC.off)
	for _, f := range b.effects {
		f()
	}
	// The last request is signalled, so its completion says when the
	// batch is done (RC completes in order).
	last := &b.wrs[len(b.wrs)-1]
	last.wr.Flags |= verbs.SendSignaled
	for i := range b.wrs {
		if w := &b.wrs[i]; w.recv >= 0 && w.wr.Opcode.HasImm() {
			b.recvWant[w.recv].imm = &w.wr.Imm
		}
	}

	wrs := make([]verbs.SendWR, len(b.wrs))
	var sendWant []wcWant
	for i, p := range b.wrs {
		wrs[i] = p.wr
		if p.wr.Flags&verbs.SendSignaled != 0 {
			sendWant = append(sendWant, sendWant1(b.req.qp.QPN(), p))
		}
	}
	if len(b.recvs) > 0 {
		if err := b.resp.qp.PostRecv(b.recvs); err != nil {
			t.Fatalf("batch %d: post %d receives on %s: %v", b.num, len(b.recvs), b.resp.desc, err)
		}
	}
	// Post in one or two calls.
	cut := len(wrs)
	if len(wrs) > 1 && r.IntN(2) == 0 {
		cut = 1 + r.IntN(len(wrs)-1)
	}
	for _, part := range [][]verbs.SendWR{wrs[:cut], wrs[cut:]} {
		if len(part) == 0 {
			continue
		}
		if err := b.req.qp.PostSend(part); err != nil {
			t.Fatalf("batch %d: post %d requests on %s: %v", b.num, len(part), b.req.desc, err)
		}
	}
	// Inline data belongs to the request once posted: overwrite the
	// sources, the destinations must still get what was there before.
	for _, p := range b.wrs {
		if p.inline {
			for _, pc := range p.src {
				for j := pc.off; j < pc.off+pc.n; j++ {
					b.req.buf[j] ^= 0xa5
					b.reqW[j] ^= 0xa5
				}
			}
		}
	}

	what := fmt.Sprintf("batch %d (%d requests from %s)", b.num, len(wrs), b.req.desc)
	got := b.s.await(t, b.req.scq, what+": send queue", wantStrings(sendWant, b.wrs))
	for i, w := range sendWant {
		if err := w.check(got[i]); err != nil {
			t.Fatalf("%s: send completion %d: %v (%s)", what, i, err, b.descOf(w.id))
		}
	}
	got = b.s.await(t, b.resp.rcq, what+": receive queue of "+b.resp.desc, wantStrings(b.recvWant, b.wrs))
	for i, w := range b.recvWant {
		if err := w.check(got[i]); err != nil {
			t.Fatalf("%s: receive completion %d: %v (%s)", what, i, err, b.descOf(w.id))
		}
	}
	b.compare(t, "requester", b.req.buf, b.reqW)
	b.compare(t, "responder", b.resp.buf, b.respW)
	// Nothing else may have completed anywhere.
	for _, c := range []struct {
		cq   verbs.CQ
		name string
	}{{b.req.scq, "requester send"}, {b.req.rcq, "requester receive"}, {b.resp.scq, "responder send"},
		{b.resp.rcq, "responder receive"}} {
		var wc [4]verbs.WC
		if n, _ := c.cq.Poll(wc[:]); n > 0 {
			t.Fatalf("%s: extra completions on the %s CQ: %s", what, c.name, wcList(wc[:n]))
		}
	}
}

func sendWant1(qpn uint32, p planned) wcWant { return sendWant(qpn, p.wr.ID, p.wr.Opcode, p.n) }

func wantStrings(ws []wcWant, wrs []planned) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
		for _, p := range wrs {
			if p.wr.ID == w.id {
				out[i] = p.desc
			}
		}
	}
	return out
}

func (b *batch) descOf(id uint64) string {
	for _, p := range b.wrs {
		if p.wr.ID == id {
			flags := ""
			if p.inline {
				flags += " inline"
			}
			if p.wr.Flags&verbs.SendSignaled != 0 {
				flags += " signalled"
			}
			return fmt.Sprintf("%s, %d SGEs%s", p.desc, len(p.wr.SGL), flags)
		}
	}
	return fmt.Sprintf("wr %#x", id)
}

// compare checks a buffer against the model and names the request whose
// bytes differ.
func (b *batch) compare(t *testing.T, who string, got, want []byte) {
	t.Helper()
	i := diff(got, want)
	if i < 0 {
		return
	}
	culprit := "no request's region (a stray write)"
	for _, p := range b.wrs {
		if b.touches(p, who, i) {
			culprit = b.descOf(p.wr.ID)
		}
	}
	t.Fatalf("batch %d: %s memory differs from the model at byte %d (got %#02x, want %#02x): %s", b.num, who, i,
		got[i], want[i], culprit)
}

// touches says whether request p reads or writes byte off of the
// requester's or responder's buffer.
func (b *batch) touches(p planned, who string, off int) bool {
	e := b.req
	if who == "responder" {
		e = b.resp
		for _, rw := range b.recvs {
			if rw.ID == p.wr.ID && inSGL(e, rw.SGL, off) {
				return true
			}
		}
		base := int(p.wr.RemoteAddr - e.mr.Addr())
		return p.wr.RemoteAddr != 0 && off >= base && off < base+max(p.n, 8)
	}
	return inSGL(e, p.wr.SGL, off)
}

func inSGL(e *endpoint, sgl []verbs.SGE, off int) bool {
	for _, s := range sgl {
		o := int(s.Addr - e.mr.Addr())
		if off >= o && off < o+int(s.Length) {
			return true
		}
	}
	return false
}
