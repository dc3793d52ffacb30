package fabric

import (
	"fmt"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
)

// A running simulation can be reconfigured between (or during) runs, as
// an operator reconfigures live switches: the online tuner changes
// watermarks in place and keeps the traffic, queues and DCQCN state that
// the old watermarks left, instead of starting a new simulation.

// SwitchConfig is the configuration switch node runs now.
func (s *Sim) SwitchConfig(node int) (SwitchConfig, error) {
	sw, err := s.switchAt(node)
	if err != nil {
		return SwitchConfig{}, err
	}
	return sw.cfg, nil
}

func (s *Sim) switchAt(node int) (*switchState, error) {
	n := s.net
	if node < 0 || node >= len(n.nodeSwitch) || n.nodeSwitch[node] < 0 {
		return nil, fmt.Errorf("fabric: node %d is not a switch", node)
	}
	return &n.switches[n.nodeSwitch[node]], nil
}

// SetSwitchConfig changes switch node's ECN marking (Kmin, Kmax, Pmax,
// on/off), PFC thresholds (alpha, headroom, XON offset, pause quanta)
// from now on. Packets already queued keep the buffer they were charged;
// the next admission and release see the new thresholds, so a group in
// XOFF resumes once it is under the new threshold, as a switch's MMU
// does. The buffer, its cell, the guaranteed bytes, the lossless classes
// and the scheduler weights are the hardware's or the class map's and are
// refused: a watermark push does not repartition the MMU.
func (s *Sim) SetSwitchConfig(node int, c SwitchConfig) error {
	sw, err := s.switchAt(node)
	if err != nil {
		return err
	}
	name := s.net.g.Nodes[node].Name
	if err := c.Validate(); err != nil {
		return fmt.Errorf("fabric: switch %s: %w", name, err)
	}
	old := sw.cfg
	if c.Buffer != old.Buffer || c.Cell != old.Cell || c.Guaranteed != old.Guaranteed || c.Lossless != old.Lossless || c.Weights != old.Weights {
		return fmt.Errorf("fabric: switch %s: buffer, cell, guaranteed bytes, lossless classes and weights cannot change while running", name)
	}
	np := int64(len(sw.ports))
	lossless := int64(0)
	for p := 0; p < NumPrio; p++ {
		if c.Lossless&(1<<p) != 0 {
			lossless++
		}
	}
	shared := c.Buffer - np*2*c.Guaranteed - np*lossless*c.Headroom
	if shared <= 0 {
		return fmt.Errorf("fabric: switch %s: %d ports x (2 x %d guaranteed + %d lossless x %d headroom) leave no shared buffer of %d",
			name, np, c.Guaranteed, lossless, c.Headroom, c.Buffer)
	}
	// A smaller shared pool than what is in use only stops admissions
	// to it until the queues drain.
	sw.cfg, sw.sharedSize = c, shared
	return nil
}

// AddFlows adds flows to a running simulation; a start already past
// begins now. Nothing is added when one is refused.
func (s *Sim) AddFlows(flows []workload.Flow) error {
	if err := s.partitioned(); err != nil {
		return err
	}
	return s.net.addFlows(flows)
}

// PortCounters are the counters of node's port so far (cumulative, as a
// switch's; the difference of two readings is a telemetry window).
func (s *Sim) PortCounters(node, port int) (PortStats, error) {
	n := s.net
	if node < 0 || node >= len(n.nodePorts) || port < 0 || port >= len(n.nodePorts[node]) {
		return PortStats{}, fmt.Errorf("fabric: node %d has no port %d", node, port)
	}
	pt := &n.ports[n.nodePorts[node][port]]
	st := pt.st
	for p := 0; p < NumPrio; p++ {
		if pt.paused[p] > s.now {
			st.PausedNs += s.now - pt.pausedAt[p]
		}
	}
	return st, nil
}
