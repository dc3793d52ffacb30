package fabric

import (
	"fmt"
	"net/netip"
)

// Access control lists on switch ports, as switches apply them to routed
// traffic, so that a misconfigured one does to frames what it does on a
// real switch (the Hostmesh paper's problem #4: RNICs that are RDMA
// unreachable because of a switch ACL). An ACL is bound to one port of a
// switch, on its ingress (frames arriving through the port, checked before
// anything else the switch does to them, so a denied traceroute probe gets
// no time-exceeded answer) or on its egress (frames routed out of the
// port, checked before they take buffer). From Start until End its rules
// are tried in order and the first that matches decides; a frame no rule
// matches is permitted. Rules match the IPv4 source and destination (hosts
// are numbered as HostIP numbers them) and the traffic class, as an ACL
// matches a DSCP. PFC frames carry no IP header and never match; frames a
// switch's CPU sends (Sim.Send) skip the egress ACLs, as they do on
// switches whose egress pipeline does not see CPU traffic.

// ACLRule is one line of an ACL.
type ACLRule struct {
	// Src and Dst match addresses inside the prefixes; the zero Prefix
	// matches any.
	Src, Dst netip.Prefix
	// Classes has a bit per priority the rule matches; 0 matches all.
	Classes uint8
	Deny    bool
}

// ACL is a list of rules bound to one direction of a switch port.
type ACL struct {
	// Switch names the switch, Port the node at the other end of the
	// port the ACL is bound to.
	Switch, Port string
	Egress       bool
	// Start and End bound when it applies (End 0: to the end of the run),
	// as a configuration is pushed and later fixed.
	Start, End int64
	Rules      []ACLRule
}

// AddACL binds an ACL to a switch port.
func (s *Sim) AddACL(a ACL) error {
	if err := s.partitioned(); err != nil {
		return err
	}
	n := s.net
	if a.Start < 0 || (a.End != 0 && a.End < a.Start) || len(a.Rules) == 0 {
		return fmt.Errorf("fabric: ACL on %s port to %s: start %d, end %d, %d rules", a.Switch, a.Port, a.Start, a.End, len(a.Rules))
	}
	si, ok := n.g.Node(a.Switch)
	if !ok || n.nodeSwitch[si] < 0 {
		return fmt.Errorf("fabric: ACL on %q: no such switch", a.Switch)
	}
	// linkPorts gives the port of the switch where frames from the peer
	// arrive, which is also where frames to the peer leave.
	pi, _, err := n.linkPorts(a.Port, a.Switch)
	if err != nil {
		return fmt.Errorf("fabric: ACL: %w", err)
	}
	lf := n.linkFaultsInit()
	if lf.aclIn == nil {
		lf.aclIn, lf.aclOut = make([][]int, len(n.ports)), make([][]int, len(n.ports))
	}
	k := len(lf.acls)
	lf.acls = append(lf.acls, a)
	if a.Egress {
		lf.aclOut[pi] = append(lf.aclOut[pi], k)
	} else {
		lf.aclIn[pi] = append(lf.aclIn[pi], k)
	}
	return nil
}

// denied says whether the ACLs bound to port pi in one direction deny
// frame p now, and counts it.
func (lf *linkFaults) denied(bound [][]int, pi int32, p *Packet, now int64) bool {
	if bound == nil || len(bound[pi]) == 0 || p.Kind == KindPause {
		return false
	}
	for _, k := range bound[pi] {
		a := &lf.acls[k]
		if now < a.Start || (a.End != 0 && now >= a.End) {
			continue
		}
		for _, r := range a.Rules {
			if r.matches(p) {
				if r.Deny {
					lf.st.ACL++
				}
				return r.Deny
			}
		}
	}
	return false
}

func (r *ACLRule) matches(p *Packet) bool {
	if r.Classes != 0 && r.Classes&(1<<p.Prio) == 0 {
		return false
	}
	return inPrefix(r.Src, p.Src) && inPrefix(r.Dst, p.Dst)
}

func inPrefix(pf netip.Prefix, node int32) bool {
	if !pf.IsValid() {
		return true
	}
	return node >= 0 && pf.Contains(HostAddr(int(node)))
}

// HostAddr is HostIP as an address.
func HostAddr(i int) netip.Addr {
	ip := HostIP(i)
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)})
}
