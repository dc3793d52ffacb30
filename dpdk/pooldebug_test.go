//go:build pooldebug

package dpdk

import (
	"strings"
	"testing"
)

// TestPoolDebugCatchesWriteAfterFree: under -tags pooldebug a freed
// buffer is poisoned, a reader of it sees the poison, and a write to it
// after the free is caught when the pool hands the buffer out again.
func TestPoolDebugCatchesWriteAfterFree(t *testing.T) {
	p, err := NewPool("pooldebug", 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pkt := p.Get()
	pkt.CopyFrom([]byte("frame"))
	data := pkt.Data()
	pkt.Free()
	if string(data) != strings.Repeat(string([]byte{PoisonByte}), len(data)) {
		t.Fatalf("a freed buffer reads %x, not the poison", data)
	}
	data[2] = 'x' // a write after the free
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "written after it was freed") || !strings.Contains(s, "byte 130") {
			t.Fatalf("no use-after-free report: %v", r)
		}
	}()
	p.Get()
	t.Fatal("Get handed out a buffer written after it was freed")
}

// TestPoolDebugCache: the same through a Cache, which keeps freed
// packets without the pool's lock.
func TestPoolDebugCache(t *testing.T) {
	p, err := NewPool("pooldebug-cache", 4, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := p.NewCache(2)
	var one [1]*Packet
	if c.GetBulk(one[:]) != 1 {
		t.Fatal("empty")
	}
	pkt := one[0]
	pkt.CopyFrom([]byte("frame"))
	data := pkt.Data()
	c.PutBulk(one[:])
	data[0] = 'x'
	defer func() {
		if s, _ := recover().(string); !strings.Contains(s, "written after it was freed") {
			t.Fatalf("no use-after-free report: %q", s)
		}
		c.Flush()
	}()
	c.GetBulk(one[:])
	t.Fatal("the cache handed out a buffer written after it was freed")
}
