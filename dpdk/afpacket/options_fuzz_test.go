package afpacket

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
)

// FuzzPortOptions: a port string ("afpacket:eth0,blocks=64,...", a flag)
// splits and its options parse or are refused naming the option, never a
// panic; what parses is a ring the kernel can be asked for, and a timeout
// given in bare milliseconds is that many, not wrapped around.
func FuzzPortOptions(f *testing.F) {
	for _, s := range []string{"afpacket:eth0", "afpacket:veth0,fanout=lb,blocks=8,blocksize=1M,frame=2048,snaplen=128,timeout=2ms,tx=ring,hwtstamp=true,rxhash=1",
		"afpacket:x,timeout=18446744073711", "afpacket:x,blocksize=3K", "afpacket:x,=1", "ring:a.a,frame=64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _, opts, err := dpdk.ParsePortString(s)
		if err != nil {
			return
		}
		o, err := parseOptions(opts)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "afpacket: ") {
				t.Fatalf("error names not afpacket: %v", err)
			}
			return
		}
		if o.blockSize < 4096 || o.blockSize&(o.blockSize-1) != 0 || o.blocks < 2 || o.blocks > 1<<16 ||
			o.frameSize < 128 || o.frameSize > o.blockSize || o.snaplen < 0 || o.timeout < time.Millisecond {
			t.Fatalf("%q: %+v", s, o)
		}
		if n, err := strconv.Atoi(opts["timeout"]); err == nil && (n > math.MaxInt64/int(time.Millisecond) || o.timeout != time.Duration(n)*time.Millisecond) {
			t.Fatalf("timeout=%d ms read as %v", n, o.timeout)
		}
	})
}
