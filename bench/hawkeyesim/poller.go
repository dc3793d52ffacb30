package hawkeyesim

import (
	"slices"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// The CPU poller does not build report packets (nothing in the simulator
// reads them); it prices them as hawkeyewire's report layout puts them on
// the wire (hawkeyewire.Packer).

// trigger is the CPU's side of a polling packet: collect unless this
// switch already answered this event or was collected within the
// interval.
func (pr *Program) trigger(st *switchState, ev uint8, victim hawkeyewire.FlowKey, now int64) {
	if pr.cfg.NoPoller {
		return
	}
	if st.lastEvent == int(ev) && now-st.lastEventAt < pr.cfg.DedupNs {
		return // the other trace type of an event already collected here
	}
	if now-st.lastCollect < pr.cfg.CollectInterval {
		pr.Stats.RateLimited++
		if pr.cfg.Reuse != nil && !(st.lastReused == int(ev) && now-st.lastReusedAt < pr.cfg.DedupNs) {
			st.lastReused, st.lastReusedAt = int(ev), now
			name := st.name
			reuse := func(*fabric.Sim) { pr.cfg.Reuse(ev, victim, name) }
			if pr.cfg.ReadDelay > 0 {
				pr.sim.At(now+pr.cfg.ReadDelay, reuse)
			} else {
				reuse(pr.sim)
			}
		}
		return
	}
	st.lastCollect, st.lastEvent, st.lastEventAt = now, int(ev), now
	deliver := func(*fabric.Sim) {
		r := pr.collect(st, pr.sim.Now())
		if pr.cfg.Report != nil {
			pr.cfg.Report(ev, victim, r)
		}
	}
	if pr.cfg.ReadDelay > 0 {
		pr.sim.At(now+pr.cfg.ReadDelay, deliver)
		return
	}
	deliver(pr.sim)
}

// Collect reads switch sw's registers now, as its CPU poller does on a
// poll but without the rate limit (full-polling baselines use it).
func (pr *Program) Collect(sw int) hawkeyewire.SwitchReport {
	return pr.collect(&pr.sw[sw], pr.sim.Now())
}

// Switches is how many switches the program runs on.
func (pr *Program) Switches() int { return len(pr.sw) }

// collect reads the epochs, drops empty entries and packs the records.
func (pr *Program) collect(st *switchState, now int64) hawkeyewire.SwitchReport {
	pr.Stats.Collections++
	shift := pr.cfg.EpochShift
	cur := now >> shift
	oldest := cur - int64(pr.cfg.ReadEpochs) + 1
	k := hawkeyewire.NewPacker(pr.cfg.MTU, pr.cfg.MaxPackets)
	r := hawkeyewire.SwitchReport{Switch: st.name}
	var buf [Epochs]*epochSlot
	slots := pr.recent(st, now, &buf)
	var pausedNow []int
	for p := range st.nports {
		if st.pauseLeft(p, now) > 0 {
			pausedNow = append(pausedNow, p)
		}
	}
	// The PFC status belongs to the newest epoch: make one when the
	// switch queued nothing yet in the current epoch but a port is
	// paused (a PFC storm stops the traffic that would have made it).
	if len(pausedNow) > 0 && (len(slots) == 0 || slots[len(slots)-1].epoch != cur) {
		slots = append(slots, &epochSlot{epoch: cur, ports: make([]portCounters, st.nports)})
	}
	for _, s := range slots {
		if !k.Epoch() {
			break
		}
		er := hawkeyewire.EpochReport{ID: uint32(s.epoch >> 2), Start: s.epoch << shift}
		newest := s.epoch == cur
		for p := range s.ports {
			pc := &s.ports[p]
			isPaused := newest && slices.Contains(pausedNow, p)
			if *pc == (portCounters{}) && !isPaused {
				continue
			}
			if !k.Add(hawkeyewire.PortRecordLen) {
				break
			}
			rec := hawkeyewire.PortRecord{Port: p, Packets: pc.packets, Paused: pc.paused, QdepthSum: pc.qsum, PauseFrames: pc.pauseFrames,
				PauseSent: pc.pauseSent}
			if newest {
				rec.PausedNow = isPaused
				rec.PauseLeftNs = max(st.pauseLeft(p, now), 0)
			}
			er.Ports = append(er.Ports, rec)
		}
		for i, b := range s.meters {
			if b == 0 {
				continue
			}
			if !k.Add(hawkeyewire.MeterRecordLen) {
				break
			}
			er.Meters = append(er.Meters, hawkeyewire.MeterRecord{In: i / st.nports, Out: i % st.nports, Bytes: b})
		}
		for i := range s.flows {
			fe := &s.flows[i]
			if !fe.valid {
				continue
			}
			if !k.Add(hawkeyewire.FlowRecordLen) {
				break
			}
			er.Flows = append(er.Flows, fe.record())
		}
		if len(er.Ports)+len(er.Meters)+len(er.Flows) > 0 {
			r.Epochs = append(r.Epochs, er)
		}
	}
	k.EndEpochs()
	for i := range st.evN {
		e := &st.ev[(st.evHead+i)%len(st.ev)]
		if e.epoch < oldest || e.epoch > cur {
			continue
		}
		if !k.Add(hawkeyewire.EvictedRecordLen) {
			break
		}
		r.Evicted = append(r.Evicted, e.rec.record())
	}
	k.Flush()
	r.Truncated = k.Truncated() || st.evLost >= oldest
	r.Bytes, r.Packets = k.Bytes(), k.Packets()
	pr.Stats.ReportBytes += uint64(k.Bytes())
	pr.Stats.ReportPkts += uint64(k.Packets())
	return r
}

// Collector gathers the reports of each polling event into a Telemetry
// with the simulation's topology: what the analyzer reads.
type Collector struct {
	// Hosts and Links are the topology every Telemetry carries (shared,
	// read-only).
	Hosts map[string]uint32
	Links []hawkeyewire.Link
	// Window: reports of one event id arriving within this of the
	// incident's start belong to it; later ones start a new incident
	// (event ids are 8 bits and come round again).
	Window int64

	sim       *fabric.Sim
	incidents []*hawkeyewire.Telemetry
	open      [256]int // incident index + 1 per event id
	last      map[string]hawkeyewire.SwitchReport
}

// NewCollector is a collector for sim's topology.
func NewCollector(sim *fabric.Sim) *Collector {
	h, l := Topology(sim)
	return &Collector{Hosts: h, Links: l, Window: 50_000_000, sim: sim, last: map[string]hawkeyewire.SwitchReport{}}
}

// Topology is sim's graph as the analyzer sees it: host addresses
// (fabric.HostIP), and every link that has a switch at an end, once:
// switch to switch with A the switch listed first in the graph, switch
// to host with Host set.
func Topology(sim *fabric.Sim) (map[string]uint32, []hawkeyewire.Link) {
	g := sim.Graph()
	hosts := map[string]uint32{}
	for _, h := range g.Hosts() {
		hosts[g.Nodes[h].Name] = fabric.HostIP(h)
	}
	var links []hawkeyewire.Link
	for _, l := range g.Links {
		aSw, bSw := sim.SwitchOf(l.A) >= 0, sim.SwitchOf(l.B) >= 0
		switch {
		case aSw && bSw:
			a, ap, b, bp := l.A, l.APort, l.B, l.BPort
			if b < a {
				a, ap, b, bp = b, bp, a, ap
			}
			links = append(links, hawkeyewire.Link{A: g.Nodes[a].Name, APort: ap, B: g.Nodes[b].Name, BPort: bp})
		case aSw:
			links = append(links, hawkeyewire.Link{A: g.Nodes[l.A].Name, APort: l.APort, Host: g.Nodes[l.B].Name})
		case bSw:
			links = append(links, hawkeyewire.Link{A: g.Nodes[l.B].Name, APort: l.BPort, Host: g.Nodes[l.A].Name})
		}
	}
	return hosts, links
}

// Begin opens the incident of a host's poll (Agent.OnPoll): its time
// and victim come from the agent rather than the first report.
func (c *Collector) Begin(p PollEvent) { c.start(p.Event, p.Victim, p.Time) }

func (c *Collector) start(ev uint8, victim hawkeyewire.FlowKey, t int64) *hawkeyewire.Telemetry {
	tel := &hawkeyewire.Telemetry{Event: ev, Victim: victim, Time: t, Hosts: c.Hosts, Links: c.Links}
	c.incidents = append(c.incidents, tel)
	c.open[ev] = len(c.incidents)
	return tel
}

// incident is the open incident of event ev for victim, or a new one
// when there is none, it is another victim's or its window has passed.
func (c *Collector) incident(ev uint8, victim hawkeyewire.FlowKey) *hawkeyewire.Telemetry {
	now := c.sim.Now()
	if i := c.open[ev]; i > 0 {
		if tel := c.incidents[i-1]; tel.Victim == victim && now-tel.Time <= c.Window {
			return tel
		}
	}
	return c.start(ev, victim, now)
}

// Report takes a switch's report (Config.Report).
func (c *Collector) Report(ev uint8, victim hawkeyewire.FlowKey, r hawkeyewire.SwitchReport) {
	tel := c.incident(ev, victim)
	tel.Reports = append(tel.Reports, r)
	c.last[r.Switch] = r
}

// Reuse files switch sw's latest report under an incident whose poll
// found the switch rate-limited (Config.Reuse). The copy costs no
// collection: its Bytes and Packets are zero.
func (c *Collector) Reuse(ev uint8, victim hawkeyewire.FlowKey, sw string) {
	r, ok := c.last[sw]
	if !ok {
		return
	}
	r.Bytes, r.Packets = 0, 0
	tel := c.incident(ev, victim)
	for _, have := range tel.Reports {
		if have.Switch == sw {
			return
		}
	}
	tel.Reports = append(tel.Reports, r)
}

// Incidents are the incidents so far, in the order they began.
func (c *Collector) Incidents() []*hawkeyewire.Telemetry { return c.incidents }

// Incident is the latest incident of event id ev, or nil.
func (c *Collector) Incident(ev uint8) *hawkeyewire.Telemetry {
	if i := c.open[ev]; i > 0 {
		return c.incidents[i-1]
	}
	return nil
}
