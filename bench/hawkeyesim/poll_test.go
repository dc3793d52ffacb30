package hawkeyesim

import (
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// TestPollTag: the simulator's Tag carries the same word as the header.
func TestPollTag(t *testing.T) {
	g := hawkeyewire.Poll{Type: hawkeyewire.TypeBoth, Ingress: 427, Egress: 5, Event: 0x42,
		Victim: hawkeyewire.FlowKey{Src: 0x0a000001, Dst: 0x0a000009, Proto: 17, Sport: 0xc123, Dport: 4791}}
	tag := PollTag(g.Type, g.Ingress, g.Egress, g.Event)
	if !IsPollTag(tag) || IsPollTag(tag&0xffff_ffff_ffff) {
		t.Fatal("marker")
	}
	b := make([]byte, hawkeyewire.HeaderLen)
	if _, err := g.Encode(b); err != nil {
		t.Fatal(err)
	}
	if uint32(tag) != uint32(b[2])<<24|uint32(b[3])<<16|uint32(b[4])<<8|uint32(b[5]) || uint16(tag>>32) != g.Type {
		t.Fatalf("tag %x vs header %x", tag, b[:6])
	}
}
