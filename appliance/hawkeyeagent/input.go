package hawkeyeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// RoCEv2's IP protocol (UDP) and UDP destination port.
const (
	protoUDP = 17
	rocePort = 4791
)

// read takes samples from in, one a line: text samples (ParseRTTLine) or
// Hostmesh batches; '#' starts a comment. Bad lines are counted, logged
// and skipped.
func (a *Agent) read(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	for ln := 1; sc.Scan(); ln++ {
		if ctx.Err() != nil {
			return nil
		}
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		if line[0] == '{' {
			if err := a.Batch(line); err != nil {
				a.stats.Bad++
				a.cfg.Log.Warn("bad Hostmesh batch", "line", ln, "err", err)
			}
			if a.err != nil {
				return a.err
			}
			continue
		}
		k, rtt, err := ParseRTTLine(line)
		if err != nil {
			a.stats.Bad++
			a.cfg.Log.Warn("bad RTT sample", "line", ln, "err", err)
			continue
		}
		if err := a.Observe(k, rtt); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Batch takes the answered probes of a Hostmesh batch (one JSON line, as
// 'appliance mesh probe --out' writes them) as samples: twice the
// one-way network latency stands in for the RTT (the way back crosses as
// many links), so that it compares with a round-trip base, the fabric's
// (the CLI's default) or the flow's own. Timeouts are not samples.
func (a *Agent) Batch(line string) error {
	var b hostmeshanalyzer.Batch
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		return err
	}
	for i := range b.Results {
		r := &b.Results[i]
		if r.Timeout || r.NetworkNs <= 0 {
			continue
		}
		src, err1 := netip.ParseAddr(r.SrcIP)
		dst, err2 := netip.ParseAddr(r.DstIP)
		if err1 != nil || err2 != nil || !src.Unmap().Is4() || !dst.Unmap().Is4() {
			return fmt.Errorf("result %d: %q -> %q: not IPv4 addresses", i, r.SrcIP, r.DstIP)
		}
		k := hawkeyewire.FlowKey{Src: addrU32(src), Dst: addrU32(dst), Proto: protoUDP, Sport: r.SPort, Dport: rocePort}
		if a.Observe(k, 2*r.NetworkNs) != nil {
			break // a failed print: a.err holds it and read stops on it
		}
	}
	return nil
}

// ParseRTTLine reads "SRC DST PROTO SPORT DPORT RTT" or
// "SRC:SPORT DST:DPORT RTT" (protocol 17, RoCEv2's UDP); RTT in ns.
func ParseRTTLine(line string) (hawkeyewire.FlowKey, int64, error) {
	f := strings.Fields(line)
	var k hawkeyewire.FlowKey
	var err error
	var rttS string
	switch len(f) {
	case 6:
		if k, err = parseFiveTuple(f[:5]); err != nil {
			return k, 0, err
		}
		rttS = f[5]
	case 3:
		for i, dst := range []*uint32{&k.Src, &k.Dst} {
			ap, err := netip.ParseAddrPort(f[i])
			if err != nil || !ap.Addr().Is4() {
				return k, 0, fmt.Errorf("%q: want IPv4:PORT", f[i])
			}
			*dst = addrU32(ap.Addr())
			if i == 0 {
				k.Sport = ap.Port()
			} else {
				k.Dport = ap.Port()
			}
		}
		k.Proto = protoUDP
		rttS = f[2]
	default:
		return k, 0, errors.New("want SRC DST PROTO SPORT DPORT RTT_NS or SRC:SPORT DST:DPORT RTT_NS")
	}
	rtt, err := strconv.ParseInt(rttS, 10, 64)
	if err != nil || rtt <= 0 {
		return k, 0, fmt.Errorf("RTT %q: a positive number of ns", rttS)
	}
	return k, rtt, nil
}

// parseFiveTuple reads "SRC DST PROTO SPORT DPORT".
func parseFiveTuple(f []string) (hawkeyewire.FlowKey, error) {
	var k hawkeyewire.FlowKey
	for i, dst := range []*uint32{&k.Src, &k.Dst} {
		a, err := netip.ParseAddr(f[i])
		if err != nil || !a.Is4() {
			return k, fmt.Errorf("%q: not an IPv4 address", f[i])
		}
		*dst = addrU32(a)
	}
	var v [3]uint64
	for i, bits := range []int{8, 16, 16} {
		n, err := strconv.ParseUint(f[2+i], 10, bits)
		if err != nil {
			return k, fmt.Errorf("%q: not a %d-bit number", f[2+i], bits)
		}
		v[i] = n
	}
	k.Proto, k.Sport, k.Dport = uint8(v[0]), uint16(v[1]), uint16(v[2])
	return k, nil
}
