package fabric

import (
	"fmt"

	"github.com/rdma-appliance/appliance/internal/topo"
)

// What switch programs and host agents (Hawkeye's telemetry and
// detection) may ask of and do to a running simulation.

// Graph is the simulated topology.
func (s *Sim) Graph() *topo.Graph { return s.net.g }

// NodeOfSwitch is the graph node of switch index sw (as hooks number
// switches), and SwitchOf the switch index of a node (-1 for hosts).
func (s *Sim) NodeOfSwitch(sw int) int { return int(s.net.switches[sw].node) }

// SwitchOf is the switch index of node, or -1.
func (s *Sim) SwitchOf(node int) int { return int(s.net.nodeSwitch[node]) }

// Peer is the node and port at the other end of node's port.
func (s *Sim) Peer(node, port int) (int, int) {
	pt := &s.net.ports[s.net.ports[s.net.nodePorts[node][port]].peer]
	return int(pt.node), int(pt.num)
}

// NumPorts is how many ports node has.
func (s *Sim) NumPorts(node int) int { return len(s.net.nodePorts[node]) }

// Paused says whether node's egress port is paused for prio now.
func (s *Sim) Paused(node, port int, prio uint8) bool {
	return s.net.ports[s.net.nodePorts[node][port]].paused[prio] > s.now
}

// QueueBytes is the bytes queued at node's egress port for prio.
func (s *Sim) QueueBytes(node, port int, prio uint8) int64 {
	return s.net.ports[s.net.nodePorts[node][port]].q[prio].bytes
}

// NextHop is the egress port switch node sends a packet for host dst
// with 5-tuple hash h through: the port ECMP picks, as for data; -1
// without a route.
func (s *Sim) NextHop(node, dst int, h uint32) int {
	hops := s.net.routes.NextHops(node, dst)
	if len(hops) == 0 {
		return -1
	}
	return hops[ecmp(h, int32(node))%uint32(len(hops))]
}

// ecmp mixes a flow's hash with the switch, as switches seed their hash
// units differently.
func ecmp(h uint32, node int32) uint32 {
	h ^= uint32(node) * 0x9e3779b1
	h ^= h >> 15
	h *= 0x2c1b3c6d
	h ^= h >> 12
	return h
}

// FlowTuple is a flow's RoCEv2 5-tuple as a switch would hash it: hosts
// numbered into 10.0.0.0/8, the UDP source port from the QP's hash, the
// destination port 4791.
func (s *Sim) FlowTuple(flow int32) (src, dst uint32, sport, dport uint16) {
	f := &s.net.flows[flow].f
	return HostIP(f.Src), HostIP(f.Dst), uint16(flowHash(f.ID)>>16) | 0xc000, 4791
}

// HostIP is the IPv4 address of host node i.
func HostIP(i int) uint32 { return 10<<24 | uint32(i) }

// Flows is how many flows the simulation has; FlowEnds their hosts.
func (s *Sim) Flows() int { return len(s.net.flows) }

// FlowEnds are a flow's source and destination host nodes.
func (s *Sim) FlowEnds(flow int32) (src, dst int) {
	f := &s.net.flows[flow].f
	return f.Src, f.Dst
}

// FlowHash is the hash switches use for a flow's ECMP.
func (s *Sim) FlowHash(flow int32) uint32 { return flowHash(s.net.flows[flow].f.ID) }

// FlowPrio is the class flow's data travels in.
func (s *Sim) FlowPrio(flow int32) uint8 { return s.net.flows[flow].prio() }

// Send transmits a packet a program builds (a probe or a polling packet)
// out of node's port: on a switch into the egress queue of its priority,
// without buffer accounting (control traffic the MMU reserves for); on a
// host ahead of its data. Size is the frame's bytes.
func (s *Sim) Send(node, port int, p Packet) error {
	if err := s.partitioned(); err != nil {
		return err
	}
	if node < 0 || node >= len(s.net.nodePorts) || port < 0 || port >= len(s.net.nodePorts[node]) {
		return fmt.Errorf("fabric: send: node %d has no port %d", node, port)
	}
	if p.Prio >= NumPrio || p.Size < MinFrame {
		return fmt.Errorf("fabric: send: priority %d, size %d", p.Prio, p.Size)
	}
	n := s.net
	pi := n.nodePorts[node][port]
	i := s.allocPacket()
	p.inPort, p.bucket, p.next = -1, bucketNone, -1
	if p.TTL == 0 {
		p.TTL = s.cfg.TTL
	}
	p.Sent, p.Enq = s.now, s.now
	s.pkts[i] = p
	pt := &n.ports[pi]
	if pt.host >= 0 {
		n.enqueue(&n.hosts[pt.host].ctl, i)
	} else {
		n.enqueue(&pt.q[p.Prio], i)
		pt.queued |= 1 << p.Prio
	}
	n.kick(pi)
	return nil
}

// Stats are the fabric-wide counters so far.
func (s *Sim) Stats() Stats {
	st := s.stats
	if s.par != nil {
		st = s.par.stats()
	}
	st.Events, st.Hops = s.Events, s.Hops
	return st
}

// FlowProgress is a flow's sender state: whether it started and
// finished, the packets it has sent (the next PSN) and had acknowledged,
// and when it started.
func (s *Sim) FlowProgress(flow int32) (started, done bool, sent, acked int32, start int64) {
	fs := &s.net.flows[flow]
	return fs.started, fs.done, fs.next, fs.una, fs.f.Start
}
