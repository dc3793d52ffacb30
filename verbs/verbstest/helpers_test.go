package verbstest

import (
	"math/rand/v2"
	"testing"

	"github.com/rdma-appliance/appliance/verbs"
)

// TestCursor checks the layout the randomized test relies on: regions of
// the asked size, in at most k pieces, disjoint, inside the buffer, aligned
// when asked.
func TestCursor(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const size = 1 << 20
	c := cursor{size: size, r: r}
	used := make([]bool, size)
	for i := 0; ; i++ {
		n, k, align := randSize(r, 1024), 1+r.IntN(4), []int{1, 8}[r.IntN(2)]
		g, ok := c.take(n, k, align)
		if !ok {
			if i < 20 {
				t.Fatalf("full after %d regions", i)
			}
			break
		}
		if g.len() != n || len(g) > k {
			t.Fatalf("region %v: %d bytes in %d pieces, asked %d in at most %d", g, g.len(), len(g), n, k)
		}
		if len(g) > 0 && align > 1 && g[0].off%align != 0 {
			t.Fatalf("region %v not %d-aligned", g, align)
		}
		for _, p := range g {
			if p.n <= 0 || p.off < 0 || p.off+p.n > size {
				t.Fatalf("piece %+v", p)
			}
			for j := p.off; j < p.off+p.n; j++ {
				if used[j] {
					t.Fatalf("byte %d handed out twice", j)
				}
				used[j] = true
			}
		}
	}
}

func TestRegionGatherScatter(t *testing.T) {
	b := []byte("0123456789abcdef")
	g := region{{1, 3}, {8, 2}, {12, 1}}
	if got := g.gather(b); string(got) != "12389c" {
		t.Fatalf("gather %q", got)
	}
	g.scatter(b, []byte("XYZW"))
	if string(b) != "0XYZ4567W9abcdef" {
		t.Fatalf("scatter %q", b)
	}
}

func TestWCWant(t *testing.T) {
	imm := uint32(7)
	w := wcWant{id: 3, status: verbs.WCSuccess, op: verbs.WCRecv, checkN: true, n: 10, imm: &imm, qpn: 0x11}
	good := verbs.WC{ID: 3, Opcode: verbs.WCRecv, ByteLen: 10, Imm: 7, Flags: verbs.WCWithImm, QPN: 0x11}
	if err := w.check(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []verbs.WC{
		{ID: 4, Opcode: verbs.WCRecv, ByteLen: 10, Imm: 7, Flags: verbs.WCWithImm, QPN: 0x11},
		{ID: 3, Opcode: verbs.WCRecv, ByteLen: 9, Imm: 7, Flags: verbs.WCWithImm, QPN: 0x11},
		{ID: 3, Opcode: verbs.WCRecv, ByteLen: 10, Imm: 7, QPN: 0x11},
		{ID: 3, Opcode: verbs.WCRecv, ByteLen: 10, Imm: 8, Flags: verbs.WCWithImm, QPN: 0x11},
		{ID: 3, Opcode: verbs.WCRecvRDMAWithImm, ByteLen: 10, Imm: 7, Flags: verbs.WCWithImm, QPN: 0x11},
		{ID: 3, Opcode: verbs.WCRecv, ByteLen: 10, Imm: 7, Flags: verbs.WCWithImm, QPN: 0x12},
		{ID: 3, Status: verbs.WCWRFlushErr, QPN: 0x11},
	} {
		if w.check(bad) == nil {
			t.Errorf("%s passed as %v", wcString(bad), w)
		}
	}
	// Error completions are checked for id, status and QP only.
	e := statusWant(0x11, 3, verbs.WCRemAccessErr)
	if err := e.check(verbs.WC{ID: 3, Status: verbs.WCRemAccessErr, Opcode: 99, QPN: 0x11}); err != nil {
		t.Fatal(err)
	}
	if i := diff([]byte("abcd"), []byte("abXd")); i != 2 {
		t.Fatalf("diff %d", i)
	}
	if i := diff([]byte("ab"), []byte("ab")); i != -1 {
		t.Fatalf("diff %d", i)
	}
	if i := diff([]byte("ab"), []byte("abc")); i != 2 {
		t.Fatalf("diff of a prefix %d", i)
	}
}
