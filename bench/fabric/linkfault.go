package fabric

import (
	"fmt"
	"math/rand/v2"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
)

// Faults of links and RNICs, for evaluating probers such as Hostmesh: a
// link that goes down for an interval (a flap), a link that silently drops
// the packets of certain 5-tuples (a bad forwarding entry: the packets
// whose hash matches), a corrupting link (frames that fail the receiver's
// ICRC check and are dropped there), and a dead RNIC (its host receives
// and sends nothing). All are checked where a frame reaches the far end of
// a link, so a lost frame has already left its sender's queue and buffer
// like any frame on the wire. Corruption draws from a generator per
// receiving port seeded by Config.Seed and the port, so adding a fault
// does not change the draws the switches' ECN marking makes, a run stays
// deterministic, and the draws at one port do not depend on the order in
// which frames reach other ports.
//
// Probes (KindProbe packets a prober sends with Sim.Send) carry RNIC
// timestamps: Sent is when the sender's RNIC started transmitting the frame
// (its send completion's time), Echo when the frame reached the receiving
// RNIC, before the host's processing delay; Deliver runs after that delay,
// so Deliver's time minus Echo is the receiver's processing delay.

// LinkFault makes a link lose frames from Start until End (End 0: to the
// end of the run).
type LinkFault struct {
	// A and B name the link's ends (nodes joined by one link). Frames from
	// A to B are affected, and from B to A too unless OneWay.
	A, B   string
	OneWay bool
	Start  int64
	End    int64
	// Prob is the share of frames lost (corrupted); 0 means all (down).
	Prob float64
	// HashMask selects the frames of certain 5-tuples: with a mask, only
	// frames whose Hash&HashMask == HashValue are lost (PAUSE frames,
	// which have no 5-tuple, never).
	HashMask, HashValue uint32
}

// FaultStats count frames lost to injected faults.
type FaultStats struct {
	Down      uint64 `json:"link_down"`    // on a link that was down
	Silent    uint64 `json:"silent_drops"` // 5-tuple drops
	Corrupted uint64 `json:"corrupted"`    // dropped by the receiver's ICRC check
	DeadRNIC  uint64 `json:"dead_rnic"`    // to or from a dead RNIC
	ACL       uint64 `json:"acl_denied"`   // denied by an ACL (acl.go)
}

// linkFaults are the faults of a simulation, by the port frames arrive at.
type linkFaults struct {
	byPort [][]int // port -> indices into faults
	faults []armedFault
	rng    []*rand.Rand // by receiving port, for corrupting faults
	st     FaultStats
	// ACLs (acl.go), by the switch port they are bound to.
	aclIn, aclOut [][]int
	acls          []ACL
}

type armedFault struct {
	LinkFault
	dead bool // a dead RNIC: every frame
}

func (n *network) linkFaultsInit() *linkFaults {
	if n.faults == nil {
		n.faults = &linkFaults{byPort: make([][]int, len(n.ports)), rng: make([]*rand.Rand, len(n.ports))}
	}
	return n.faults
}

// linkPorts finds the receiving ports of the link between nodes a and b:
// the port of b where frames from a arrive, and the port of a where frames
// from b arrive.
func (n *network) linkPorts(a, b string) (atB, atA int32, err error) {
	ai, ok := n.g.Node(a)
	if !ok {
		return 0, 0, fmt.Errorf("fabric: fault: no node %q", a)
	}
	bi, ok := n.g.Node(b)
	if !ok {
		return 0, 0, fmt.Errorf("fabric: fault: no node %q", b)
	}
	for _, pi := range n.nodePorts[ai] {
		peer := n.ports[pi].peer
		if n.ports[peer].node == int32(bi) {
			return peer, pi, nil
		}
	}
	return 0, 0, fmt.Errorf("fabric: fault: no link between %s and %s", a, b)
}

// AddLinkFault arms a link fault.
func (s *Sim) AddLinkFault(f LinkFault) error {
	if err := s.partitioned(); err != nil {
		return err
	}
	n := s.net
	if f.Prob < 0 || f.Prob > 1 || f.Start < 0 || (f.End != 0 && f.End < f.Start) {
		return fmt.Errorf("fabric: link fault %s-%s: probability %g, start %d, end %d", f.A, f.B, f.Prob, f.Start, f.End)
	}
	atB, atA, err := n.linkPorts(f.A, f.B)
	if err != nil {
		return err
	}
	lf := n.linkFaultsInit()
	k := len(lf.faults)
	lf.faults = append(lf.faults, armedFault{LinkFault: f})
	lf.arm(atB, k, s.cfg.Seed)
	if !f.OneWay {
		lf.arm(atA, k, s.cfg.Seed)
	}
	return nil
}

// arm makes fault k act on frames arriving at port pi, which gets its
// random stream on its first fault.
func (lf *linkFaults) arm(pi int32, k int, seed uint64) {
	lf.byPort[pi] = append(lf.byPort[pi], k)
	if lf.rng[pi] == nil {
		lf.rng[pi] = rand.New(rand.NewPCG(seed, 0x1f0a17<<32|uint64(pi)))
	}
}

// KillRNIC makes host's RNIC dead from start until end (0: the end of the
// run): nothing it sends leaves its link and nothing reaches it.
func (s *Sim) KillRNIC(host string, start, end int64) error {
	if err := s.partitioned(); err != nil {
		return err
	}
	n := s.net
	i, ok := n.g.Node(host)
	if !ok || n.nodeHost[i] < 0 {
		return fmt.Errorf("fabric: dead RNIC %q: no such host", host)
	}
	hp := n.hosts[n.nodeHost[i]].port
	lf := n.linkFaultsInit()
	k := len(lf.faults)
	lf.faults = append(lf.faults, armedFault{LinkFault: LinkFault{Start: start, End: end}, dead: true})
	lf.byPort[hp] = append(lf.byPort[hp], k)
	lf.byPort[n.ports[hp].peer] = append(lf.byPort[n.ports[hp].peer], k)
	return nil
}

// lose says whether frame i, arriving at port pi, is lost to a fault.
func (lf *linkFaults) lose(pi, i int32, p *Packet, now int64) bool {
	for _, k := range lf.byPort[pi] {
		f := &lf.faults[k]
		if now < f.Start || (f.End != 0 && now >= f.End) {
			continue
		}
		switch {
		case f.dead:
			lf.st.DeadRNIC++
			return true
		case f.HashMask != 0:
			if p.Kind != KindPause && p.Hash&f.HashMask == f.HashValue {
				lf.st.Silent++
				return true
			}
		case f.Prob == 0:
			lf.st.Down++
			return true
		case lf.rng[pi].Float64() < f.Prob:
			lf.st.Corrupted++
			return true
		}
	}
	return false
}

// FaultStats are the frames lost to injected faults so far.
func (s *Sim) FaultStats() FaultStats {
	if s.net.faults == nil {
		return FaultStats{}
	}
	return s.net.faults.st
}

// SetProcessingDelay changes host's processing delay from now on (an
// overloaded CPU): every packet it receives is held this long before its
// RNIC handles it.
func (s *Sim) SetProcessingDelay(host string, d int64) error {
	i, ok := s.net.g.Node(host)
	if !ok || s.net.nodeHost[i] < 0 || d < 0 {
		return fmt.Errorf("fabric: processing delay %d on %q: no such host or negative", d, host)
	}
	s.net.hosts[s.net.nodeHost[i]].cfg.ProcessingDelay = d
	return nil
}

// AddFlow adds a flow to a built simulation (traffic an experiment chooses
// after looking at the routes, such as flows that collide under ECMP); it
// starts at f.Start, or now if that has passed. It returns the flow's
// index.
func (s *Sim) AddFlow(f workload.Flow) (int32, error) {
	if err := s.partitioned(); err != nil {
		return -1, err
	}
	n := s.net
	g := n.g
	if f.Src < 0 || f.Src >= len(g.Nodes) || f.Dst < 0 || f.Dst >= len(g.Nodes) ||
		n.nodeHost[f.Src] < 0 || n.nodeHost[f.Dst] < 0 || f.Src == f.Dst || f.Prio >= NumPrio || f.Size <= 0 {
		return -1, fmt.Errorf("fabric: add flow %d: %d -> %d, size %d, prio %d", f.ID, f.Src, f.Dst, f.Size, f.Prio)
	}
	fi := n.appendFlow(f)
	s.schedule(max(f.Start, s.now), evFlowStart, fi, 0)
	return fi, nil
}

// FlowIDHash is the ECMP hash of a flow with this ID (what Sim.FlowHash
// returns once it is added), so experiments can pick flows that collide.
func FlowIDHash(id int) uint32 { return flowHash(id) }
