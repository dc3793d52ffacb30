//go:build linux

package host

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// gstrings is a struct ethtool_gstrings as the kernel fills it with names.
func gstrings(names ...string) []byte {
	b := make([]byte, 12+ethGStringLen*len(names))
	binary.NativeEndian.PutUint32(b[8:12], uint32(len(names)))
	for i, n := range names {
		copy(b[12+i*ethGStringLen:12+(i+1)*ethGStringLen], n)
	}
	return b
}

// FuzzEthtoolBuffers: whatever the kernel (a driver) left in the
// ETHTOOL_GSTRINGS and ETHTOOL_GSTATS buffers is decoded or refused, never
// read past; the names are n, NUL-free and at most ETH_GSTRING_LEN bytes,
// each name indexes its first position; the values are n, in order.
func FuzzEthtoolBuffers(f *testing.F) {
	f.Add(gstrings("rx_prio3_pause", "tx_prio3_pause", "rx_prio3_pause_duration"), 3)
	f.Add(gstrings("dup", "dup", strings.Repeat("x", ethGStringLen)), 3)
	f.Add(gstrings("a", "b"), 3)
	f.Add([]byte{1, 2, 3}, 0)
	f.Fuzz(func(t *testing.T, buf []byte, n int) {
		names, index, err := decodeGStrings(buf, n)
		if err == nil {
			if len(names) != n {
				t.Fatalf("%d names, asked for %d", len(names), n)
			}
			for i, name := range names {
				if len(name) > ethGStringLen || strings.IndexByte(name, 0) >= 0 {
					t.Fatalf("name %d: %q", i, name)
				}
				if j, ok := index[name]; !ok || j > i || names[j] != name {
					t.Fatalf("name %d %q indexed at %d", i, name, j)
				}
			}
			if len(index) > n {
				t.Fatalf("%d names indexed of %d", len(index), n)
			}
		}
		// The same bytes as the values of n statistics.
		stats := append(make([]byte, 0, len(buf)), buf...)
		dst := make([]uint64, 2)
		vals, err := decodeGStats(stats, n, dst)
		if err != nil {
			return
		}
		if len(vals) != n {
			t.Fatalf("%d values, asked for %d", len(vals), n)
		}
		for i, v := range vals {
			if w := binary.NativeEndian.Uint64(stats[8+8*i:]); v != w {
				t.Fatalf("value %d: %d, the buffer has %d", i, v, w)
			}
		}
	})
}

// FuzzPFCNames: any driver's statistics names (one a line, `ethtool -S`'s
// list) give a priority's PFC counters or an error naming the counter
// looked for; the counters found are the values at the names', durations
// never negative.
func FuzzPFCNames(f *testing.F) {
	f.Add("rx_prio3_pause\ntx_prio3_pause\nrx_prio3_pause_duration\ntx_prio3_pause_duration", uint8(3), uint64(1<<62))
	f.Add("rx_priority_3_xon.nic\nrx_priority_3_xoff.nic\ntx_priority_3_xoff.nic\nrx_priority_4_xoff.nic", uint8(3), uint64(7))
	f.Add("port.rx_priority_0_xoff_rx\nport.tx_priority_0_xoff_tx", uint8(0), uint64(0))
	f.Add("peer_ifindex\nrx_queue_0_xdp_packets", uint8(3), uint64(1))
	f.Fuzz(func(t *testing.T, listing string, prio uint8, seed uint64) {
		prio %= 8
		e := &EthtoolStats{netdev: "fuzz0"}
		var err error
		e.names, e.index, err = decodeGStrings(gstrings(strings.Split(listing, "\n")...), strings.Count(listing, "\n")+1)
		if err != nil {
			return // a line too long for a name: no driver lists one
		}
		vals := make([]uint64, len(e.names))
		for i := range vals {
			vals[i] = seed * uint64(i+1)
		}
		p := &PFCStats{e: e, prio: int(prio)}
		if err := p.lookup(); err != nil {
			if want := fmt.Sprintf(pfcNames[0][0], prio); !strings.Contains(err.Error(), want) {
				t.Fatalf("error does not name %s: %v", want, err)
			}
			return
		}
		c := pfcFrom(p.idx, vals)
		if name := e.names[p.idx[0]]; !bytes.Contains([]byte(name), []byte(fmt.Sprint(prio))) || c.RxPause != vals[p.idx[0]] {
			t.Fatalf("rx pause from %q: %d", name, c.RxPause)
		}
		if p.idx[1] >= 0 && c.TxPause != vals[p.idx[1]] {
			t.Fatalf("tx pause %d, want %d", c.TxPause, vals[p.idx[1]])
		}
		if c.RxPauseNs < 0 || c.TxPauseNs < 0 || c.Durations != (p.idx[2] >= 0) {
			t.Fatalf("durations %+v", c)
		}
	})
}

// FuzzPFCTools: the output of dcb, mlnx_qos and ethtool -a (tools of
// whatever version) gives eight PFC flags or none, never a panic.
func FuzzPFCTools(f *testing.F) {
	f.Add("pfc-cap 8 macsec-bypass off delay 4096\nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n")
	f.Add("PFC configuration:\n\tpriority    0   1   2   3   4   5   6   7\n\tenabled     0   0   0   1   0   0   0   0\n")
	f.Add("Pause parameters for eth0:\nAutonegotiate:\toff\nRX:\t\ton\nTX:\t\toff\n")
	f.Add("prio-pfc 9:on 3:on")
	f.Fuzz(func(t *testing.T, out string) {
		for name, flags := range map[string][]bool{"dcb": parseDCBPFC(out), "mlnx_qos": parseMlnxQos(out), "flags": parseFlags8(out)} {
			if flags != nil && len(flags) != 8 {
				t.Fatalf("%s: %d flags", name, len(flags))
			}
		}
		_ = parseEthtoolPause(out)
	})
}

// FuzzParseHugeSize: a huge page size (a flag, sysfs's directory name)
// parses to a positive KiB count or is refused; none overflows.
func FuzzParseHugeSize(f *testing.F) {
	for _, s := range []string{"2M", "1G", "2048kB", "hugepages-1048576kB", "9223372036854775807G", "0M", "-2M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseSize(s); err == nil && v <= 0 {
			t.Fatalf("%q = %d KiB", s, v)
		}
	})
}
