package dtatofino

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/p4/stf"
)

// The ordinary forwarding of translator.p4 and reporter.p4, replayed
// against a model of what the control plane installs (Routes): the
// software translator and reporter are hosts and route nothing, so this
// part of the Tofino programs has no twin in the lab, and the replay
// models it from the route entries instead of skipping it.

// forwarded counts the forwarding tests the replays compared, by outcome.
var forwarded = map[string]int{}

// forwardModel is what both programs do with a packet that is neither a
// report nor an answer of theirs: one whose parser takes no IPv4 header
// (another EtherType, another IP version, a header shorter than 20 bytes)
// is dropped; IPv4 goes by ipv4_fwd, the longest prefix of the
// destination among the test's entries (its default action without one:
// discard unless the test sets another), out of the entry's port with the
// next hop's MAC as destination and the port's as source, nothing else of
// the frame changed.
func forwardModel(tc *stf.Test) ([]stf.Output, string, error) {
	f := tc.In
	if !parsesIPv4(f) {
		forwarded["dropped: not IPv4"]++
		return nil, "", nil
	}
	dst := netip.AddrFrom4([4]byte(f[header.EthernetHeaderLen+16 : header.EthernetHeaderLen+20]))
	var hit *stf.Entry
	best := -1
	for i := range tc.Adds {
		e := &tc.Adds[i]
		if e.Table != "Ingress.ipv4_fwd" {
			continue
		}
		k, _ := e.Key("dst_addr")
		pfx, err := k.Prefix()
		if err != nil || !pfx.Addr().Is4() {
			return nil, "", fmt.Errorf("ipv4_fwd entry: %v %v", pfx, err)
		}
		if pfx.Contains(dst) && pfx.Bits() > best {
			hit, best = e, pfx.Bits()
		}
	}
	if hit == nil {
		for i := range tc.Defaults {
			if tc.Defaults[i].Table == "Ingress.ipv4_fwd" {
				hit = &tc.Defaults[i]
			}
		}
	}
	if hit == nil || hit.Action != "Ingress.forward" {
		forwarded["dropped: no route"]++
		return nil, "", nil
	}
	out := append([]byte(nil), f...)
	copy(out[0:6], hit.Bytes("dmac", 6))
	copy(out[6:12], hit.Bytes("smac", 6))
	forwarded["routed"]++
	return []stf.Output{{Port: int(hit.Uint("port")), Frame: out}}, "", nil
}

// parsesIPv4 says both programs' parsers take an IPv4 header from frame
// f: the EtherType, version 4 and a header of at least 20 bytes
// (parse_ipv4_version), all of it in the frame.
func parsesIPv4(f []byte) bool {
	return len(f) >= header.EthernetHeaderLen+header.IPv4MinHeaderLen &&
		binary.BigEndian.Uint16(f[12:]) == header.EtherTypeIPv4 && f[14] >= 0x45 && f[14] <= 0x4f
}

// reporterIngressModel is reporter.p4's ingress for a packet that is no
// mirrored copy: what comes to one of the switch's own addresses (own_addr)
// ends there, the translator's ACKs and NACKs counted, and the rest is
// forwarded (forwardModel). A report rule's copy is mirrored, which
// P4Testgen does not follow: the harness's tests replay it
// (reporterModel).
func reporterIngressModel(tc *stf.Test) ([]stf.Output, string, error) {
	f := tc.In
	if parsesIPv4(f) {
		dst := f[header.EthernetHeaderLen+16 : header.EthernetHeaderLen+20]
		for _, e := range tc.Adds {
			if k, _ := e.Key("dst_addr"); e.Table == "Ingress.own_addr" && string(k.Value()) == string(dst) {
				forwarded["dropped: to the switch"]++
				return nil, "", nil
			}
		}
	}
	return forwardModel(tc)
}

// harnessDrops counts the tests of the -DP4TESTGEN harnesses' ports
// whose input no pass of the switch writes, by reason: the harness drops
// them, and the replay holds P4Testgen to a drop there.
var harnessDrops = map[string]int{}

func harnessDrop(reason string) ([]stf.Output, string, error) {
	harnessDrops[reason]++
	return nil, "", nil
}

// requireKinds fails t unless every kind was compared at least once: a
// regenerated set that lost a path must say so rather than pass on less.
func requireKinds(t *testing.T, counts map[string]int, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		if counts[k] == 0 {
			t.Errorf("no test of the set compared %q: did the regenerated set lose the path?", k)
		}
	}
}
