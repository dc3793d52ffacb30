package hawkeyesim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Switch is the program on one switch driven by Ethernet frames rather
// than by the simulator's hooks: the same registers and the same count,
// pause and trace code a simulated switch runs, behind the forwarding and
// the frame handling of p4/hawkeyetofino/telemetry.p4 (its generated
// tests replay against it). A switch of the simulator is told its
// routes, ports and queues by the simulator; a Switch takes them from its
// configuration (routes, ports with their dev ids) and from the caller
// (the time and the queue a packet finds). It has no CPU: Packet says
// when the program hands a polling event to it, and Collect reads the
// registers as the CPU poller does.
type Switch struct {
	pr     *Program
	st     *switchState
	ports  []SwitchPort
	idx    map[int]int // dev port -> local index
	routes []SwitchRoute
	// victims numbers the victims' 5-tuples for the duplicate check,
	// which a simulated switch keys by the simulator's flow index.
	victims map[hawkeyewire.FlowKey]int32
	// cpuPort is the switch CPU's dev port (-1: none; SetCPUPort).
	cpuPort int
	// Counts of frames the switch dropped, by why.
	Counts SwitchCounts
}

// SwitchCounts are a Switch's frame counters besides the program's Stats.
type SwitchCounts struct {
	Forwarded uint64 // IPv4 frames sent on
	NoRoute   uint64 // IPv4 frames without a route, or routed to discard
	Malformed uint64 // frames cut short, IPv4 headers of another version or length, invalid polling headers
	PFC       uint64 // PFC frames taken (never forwarded)
	Other     uint64 // frames of another EtherType, or MAC control frames other than PFC, dropped
}

// SwitchPort is a port of a Switch: its local index is its position.
type SwitchPort struct {
	// Dev is the port's id on the wire (a Tofino dev port, 9 bits: the
	// polling header carries it).
	Dev int
	// Bandwidth in bits/s: a PFC quantum is 512 bit times.
	Bandwidth float64
	// Host says the port faces a host: traces end there.
	Host bool
}

// SwitchRoute sends IPv4 packets for Prefix (the longest match wins) out
// of dev port Port with the given MAC addresses; Discard drops them. The
// victim of a polling packet is routed by the same table.
type SwitchRoute struct {
	Prefix         netip.Prefix
	Discard        bool
	Port           int
	DstMAC, SrcMAC [6]byte
}

// Out is a frame a Switch sent out of a dev port.
type Out struct {
	Port  int
	Frame []byte
}

// Frame layout constants (the P4 parser's).
const (
	etherIPv4   = 0x0800
	etherMACCtl = 0x8808
	opcodePFC   = 0x0101
	ethLen      = 14
	ipv4Len     = 20
	udpLen      = 8
	pfcLen      = 20 // opcode, class-enable vector, eight pause times
	roceDport   = 4791
	fcsLen      = 4
)

// NewSwitch builds a Switch named name with ports (at most 512, each dev
// port once) and routes (IPv4 prefixes without host bits, each once).
func NewSwitch(name string, cfg Config, ports []SwitchPort, routes []SwitchRoute) (*Switch, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	idx := map[int]int{}
	for i, p := range ports {
		if p.Dev < 0 || p.Dev > hawkeyewire.MaxPort {
			return nil, fmt.Errorf("hawkeye: port %d: dev port %d is not 0..%d", i, p.Dev, hawkeyewire.MaxPort)
		}
		if _, dup := idx[p.Dev]; dup {
			return nil, fmt.Errorf("hawkeye: port %d: dev port %d listed twice", i, p.Dev)
		}
		if !(p.Bandwidth > 0) || math.IsInf(p.Bandwidth, 0) {
			return nil, fmt.Errorf("hawkeye: port %d: bandwidth %g", i, p.Bandwidth)
		}
		idx[p.Dev] = i
	}
	seen := map[netip.Prefix]bool{}
	for i, r := range routes {
		if !r.Prefix.IsValid() || !r.Prefix.Addr().Is4() || r.Prefix != r.Prefix.Masked() {
			return nil, fmt.Errorf("hawkeye: route %d: %v is not an IPv4 prefix without host bits", i, r.Prefix)
		}
		if seen[r.Prefix] {
			return nil, fmt.Errorf("hawkeye: route %d: %v routed twice", i, r.Prefix)
		}
		seen[r.Prefix] = true
		if !r.Discard && (r.Port < 0 || r.Port > hawkeyewire.MaxPort) {
			return nil, errors.New("hawkeye: route " + r.Prefix.String() + ": dev port out of range")
		}
	}
	np := len(ports)
	st := switchState{name: name, nports: np, bw: make([]float64, np), peerSw: make([]bool, np),
		pauseUntil: make([]int64, np*fabric.NumPrio), ev: make([]evicted, cfg.MaxEvicted), seen: map[seenKey]int64{},
		evLost: math.MinInt64, lastCollect: math.MinInt64 / 2, lastEvent: -1, lastReused: -1}
	for i, p := range ports {
		st.bw[i] = p.Bandwidth
		st.peerSw[i] = !p.Host
	}
	for k := range st.ring {
		st.ring[k] = epochSlot{epoch: -1, flows: make([]flowEntry, cfg.Flows), ports: make([]portCounters, np),
			meters: make([]uint64, np*np)}
	}
	pr := &Program{cfg: cfg, mask: uint32(cfg.Flows - 1), lastSw: -1, sw: []switchState{st}}
	rs := slices.Clone(routes)
	// Longest prefix first: the first match is the LPM's.
	slices.SortStableFunc(rs, func(a, b SwitchRoute) int { return b.Prefix.Bits() - a.Prefix.Bits() })
	return &Switch{pr: pr, st: &pr.sw[0], ports: slices.Clone(ports), idx: idx, routes: rs,
		victims: map[hawkeyewire.FlowKey]int32{}, cpuPort: -1}, nil
}

// SetCPUPort names the switch CPU's dev port (telemetry.p4's from_cpu
// table): a polling frame that comes in on it is the CPU's re-trace and
// leaves, as the CPU wrote it, by the dev port its header's egress field
// names, with no duplicate check and no copy back to the CPU.
func (s *Switch) SetCPUPort(dev int) { s.cpuPort = dev }

// Stats are the program's counters on this switch.
func (s *Switch) Stats() Stats { return s.pr.Stats }

// Collect reads the registers at now as the CPU poller does on a poll.
func (s *Switch) Collect(now int64) hawkeyewire.SwitchReport { return s.pr.collect(s.st, now) }

// route is the route of dst, false without one.
func (s *Switch) route(dst uint32) (SwitchRoute, bool) {
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], dst)
	addr := netip.AddrFrom4(a)
	for _, r := range s.routes {
		if r.Prefix.Contains(addr) {
			return r, true
		}
	}
	return SwitchRoute{}, false
}

// Packet runs one frame (without FCS) that arrived on dev port in at time
// now (ns) through the switch, and returns the frames it sends on; qbytes
// is the queue a data packet finds at its egress port (bytes ahead of
// it). toCPU says the program hands the frame to the CPU: a polling
// event new here, which the CPU poller answers with a collection.
//
// IPv4 is routed (MACs rewritten, nothing else), and a RoCEv2 packet
// (UDP destination port 4791, a 20-byte header, not a fragment) counted
// by the epoch telemetry at its egress port; a polling packet is traced;
// a PFC frame sets the pause timers of its port and is taken. Everything
// else is dropped and counted in Counts.
func (s *Switch) Packet(now int64, in int, frame []byte, qbytes int64) (outs []Out, toCPU bool) {
	if len(frame) < ethLen {
		s.Counts.Malformed++
		return nil, false
	}
	switch binary.BigEndian.Uint16(frame[12:14]) {
	case etherIPv4:
		return s.ipv4(now, in, frame, qbytes), false
	case hawkeyewire.EtherType:
		if in == s.cpuPort {
			return s.fromCPU(frame), false
		}
		return s.poll(now, in, frame)
	case etherMACCtl:
		s.pfc(now, in, frame)
		return nil, false
	}
	s.Counts.Other++
	return nil, false
}

func (s *Switch) ipv4(now int64, in int, frame []byte, qbytes int64) []Out {
	ip := frame[ethLen:]
	// An IPv4 header as hosts' decoders take it: version 4, 20 bytes or
	// more.
	if len(ip) < ipv4Len || ip[0]>>4 != 4 || ip[0]&0xf < 5 {
		s.Counts.Malformed++
		return nil
	}
	ihl, frag, proto := ip[0]&0xf, binary.BigEndian.Uint16(ip[6:8])&0x1fff, ip[9]
	udp := ihl == 5 && frag == 0 && proto == ProtoUDP
	if udp && len(ip) < ipv4Len+udpLen {
		s.Counts.Malformed++
		return nil
	}
	src, dst := binary.BigEndian.Uint32(ip[12:16]), binary.BigEndian.Uint32(ip[16:20])
	r, ok := s.route(dst)
	if !ok || r.Discard {
		s.Counts.NoRoute++
		return nil
	}
	out := slices.Clone(frame)
	copy(out[0:6], r.DstMAC[:])
	copy(out[6:12], r.SrcMAC[:])
	s.Counts.Forwarded++
	if udp && binary.BigEndian.Uint16(ip[ipv4Len+2:]) == roceDport {
		// A port the switch has no index for keeps no telemetry.
		if o, ok := s.idx[r.Port]; ok {
			i, known := s.idx[in]
			if !known {
				i = -1
			}
			size := len(frame) + fcsLen
			depth := uint64(max(qbytes-int64(size), 0))
			sport, dport := binary.BigEndian.Uint16(ip[ipv4Len:]), binary.BigEndian.Uint16(ip[ipv4Len+2:])
			s.pr.count(s.st, now, i, o, size, depth, s.st.pauseLeft(o, now) > 0, src, dst, sport, dport)
		}
	}
	return []Out{{Port: r.Port, Frame: out}}
}

func (s *Switch) poll(now int64, in int, frame []byte) ([]Out, bool) {
	h, ok := hawkeyewire.ParseFrame(frame)
	if !ok {
		s.Counts.Malformed++
		return nil, false
	}
	s.pr.Stats.Polls++
	t, ev, victim := h.Type(), h.Event(), h.Victim()
	i, known := s.idx[in]
	if !known {
		// Causality is per local port: without an index the switch
		// cannot follow PFC from this port, only the victim's path.
		i = -1
		t &^= hawkeyewire.TypePFC
		if t == 0 {
			return nil, false
		}
	}
	id, seen := s.victims[victim]
	if !seen {
		id = int32(len(s.victims))
		s.victims[victim] = id
	}
	victimPort := func() int {
		if r, ok := s.route(victim.Dst); ok && !r.Discard {
			if o, ok := s.idx[r.Port]; ok {
				return o
			}
		}
		return -1
	}
	var outs []Out
	send := func(o int, t uint16) bool {
		f := slices.Clone(frame)
		q := hawkeyewire.Header(f[ethLen : ethLen+hawkeyewire.HeaderLen])
		q.SetType(t)
		q.SetPorts(uint16(in), uint16(s.ports[o].Dev))
		outs = append(outs, Out{Port: s.ports[o].Dev, Frame: f})
		return true
	}
	visit, handled := s.pr.trace(s.st, now, i, t, ev, id, victimPort, send)
	return outs, handled && !visit.Quiet
}

// fromCPU forwards the CPU's polling frame by its header's egress port:
// the data plane reads the header's fields, not its type.
func (s *Switch) fromCPU(frame []byte) []Out {
	if len(frame) < ethLen+hawkeyewire.HeaderLen {
		s.Counts.Malformed++
		return nil
	}
	h := hawkeyewire.Header(frame[ethLen:])
	return []Out{{Port: int(h.Egress()), Frame: slices.Clone(frame)}}
}

func (s *Switch) pfc(now int64, in int, frame []byte) {
	b := frame[ethLen:]
	if len(b) < 2 || binary.BigEndian.Uint16(b) != opcodePFC {
		s.Counts.Other++
		return
	}
	if len(b) < pfcLen {
		s.Counts.Malformed++
		return
	}
	s.Counts.PFC++
	i, ok := s.idx[in]
	if !ok {
		return
	}
	// 802.1Qbb: a class's pause time counts when its enable bit is set.
	enable := b[3]
	counted := false
	for prio := range uint8(8) {
		if enable>>prio&1 == 0 {
			continue
		}
		quanta := binary.BigEndian.Uint16(b[4+2*int(prio):])
		s.pr.pauseRx(s.st, now, i, prio, quanta, !counted)
		counted = counted || quanta > 0
	}
}

// Registers are this switch's state as p4/hawkeyetofino/telemetry.p4's
// egress registers hold it, by register name, one pipe: a twin whose
// registers the Tofino switch CPU (hawkeyetofino.CPU) reads through the
// same script and parser as on a switch. Entries are indexed as the P4
// indexes them ({ring slot, local port}, {ring slot, hash slot}, {ring
// slot, in, out}) and tagged with the 8-bit epoch id ts[29:22]; counters
// keep their low 32 bits, pause_until the low 32 bits of the latest end of
// a pause on the port (any priority: the P4 keeps priority 3's). It needs
// the P4's sizes: 1 ms epochs, 4096 flow slots, at most 64 ports.
func (s *Switch) Registers() (map[string][]uint64, error) {
	st, n := s.st, s.st.nports
	if s.pr.cfg.EpochShift != 20 || s.pr.cfg.Flows != 4096 || n > 64 {
		return nil, fmt.Errorf("hawkeye: registers: telemetry.p4 has 1 ms epochs (shift 20, not %d), 4096 flow slots (not %d), 64 ports (not %d)",
			s.pr.cfg.EpochShift, s.pr.cfg.Flows, n)
	}
	r := map[string][]uint64{}
	mk := func(name string, size int) []uint64 {
		r[name] = make([]uint64, size)
		return r[name]
	}
	pe, pk, pq, pz, pf := mk("port_epoch", 256), mk("port_pkts", 256), mk("port_qdepth", 256), mk("port_paused", 256), mk("port_pfc_frames", 256)
	pu := mk("pause_until", 64)
	me, mb := mk("pair_epoch", 16384), mk("pair_bytes", 16384)
	fe, fs, fd, fp := mk("flow_epoch", 16384), mk("flow_src", 16384), mk("flow_dst", 16384), mk("flow_ports", 16384)
	fh, fk, fq, fz := mk("flow_hop", 16384), mk("flow_pkts", 16384), mk("flow_qdepth", 16384), mk("flow_paused", 16384)
	const low = 0xffffffff
	for k := range st.ring {
		sl := &st.ring[k]
		if sl.epoch < 0 {
			continue
		}
		id := uint64(sl.epoch>>2) & 0xff
		for p, pc := range sl.ports {
			i := k*64 + p
			pe[i], pk[i], pq[i], pz[i], pf[i] = id, uint64(pc.packets), pc.qsum&low, uint64(pc.paused), uint64(pc.pauseFrames)
		}
		for m, b := range sl.meters {
			if b != 0 {
				i := k*4096 + m/n*64 + m%n
				me[i], mb[i] = id, b&low
			}
		}
		for j := range sl.flows {
			f := &sl.flows[j]
			if !f.valid {
				continue
			}
			i := k*4096 + j
			fe[i], fs[i], fd[i], fp[i] = id, uint64(f.src), uint64(f.dst), uint64(f.sport)<<16|uint64(f.dport)
			fh[i], fk[i], fq[i], fz[i] = uint64(f.in)<<6|uint64(f.out), uint64(f.packets), f.qsum&low, uint64(f.paused)
		}
	}
	for p := range n {
		pu[p] = uint64(uint32(slices.Max(st.pauseUntil[p*fabric.NumPrio : (p+1)*fabric.NumPrio])))
	}
	return r, nil
}
