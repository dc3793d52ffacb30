package dpdk

import (
	"bytes"
	"fmt"
)

// Use-after-free checking, a test aid. Pool memory lives outside the Go
// heap, so the race detector does not see a buffer written by one
// goroutine while another still reads it, or after it went back to its
// pool. Built with -tags pooldebug (go test -tags pooldebug ./...), every
// pool fills each buffer it takes back (Put, PutBulk, a Cache's PutBulk)
// with PoisonByte and checks, when it hands the buffer out again, that
// nothing wrote to it meanwhile, panicking with the first changed byte if
// something did. A reader of freed memory sees the poison (a RoCE frame
// then fails its ICRC). Without the tag none of this is compiled.

// PoisonByte fills freed buffers under -tags pooldebug.
const PoisonByte = 0xdb

var poisonPattern = bytes.Repeat([]byte{PoisonByte}, 4096)

// PoolDebug says whether this build poisons freed buffers.
func PoolDebug() bool { return poolDebug }

// poison fills a freed buffer.
func poison(pkt *Packet) {
	for b := pkt.buf; len(b) > 0; {
		b = b[copy(b, poisonPattern):]
	}
}

// checkPoison panics if a buffer was written since it was freed.
func checkPoison(p *Pool, pkt *Packet) {
	for off, b := 0, pkt.buf; len(b) > 0; {
		n := min(len(b), len(poisonPattern))
		if !bytes.Equal(b[:n], poisonPattern[:n]) {
			i := off
			for b[i-off] == PoisonByte {
				i++
			}
			panic(fmt.Sprintf("dpdk: pool %q: buffer %p written after it was freed: byte %d of %d is %#x, not the poison %#x",
				p.name, pkt, i, len(pkt.buf), pkt.buf[i], PoisonByte))
		}
		off += n
		b = b[n:]
	}
}
