// Package dtatofino is the control plane of the DTA (Direct Telemetry Access)
// switch programs for Tofino: translator.p4, the translator in front of
// the collectors that turns DTA reports into RoCEv2 WRITEs and FETCH_ADDs
// into collector memory, and reporter.p4, a switch that reports on the
// flows it forwards. They are the Tofino counterparts of translator/dtatranslator's
// software translator and use its wire formats and collector memory
// layouts, so a collector cannot tell which translator wrote a table.
//
// A Translator or Reporter is pure data: ports, routes, addresses, the
// collectors with their queue pair and memory regions, the reporters the
// translator tracks, the report rules of a reporter. Validate checks it
// against what the P4 programs can hold; Script and ReporterScript render
// it as a bfrt_python script for `bfshell -b` that clears the program's
// state, sets the ports up, creates the mirror sessions and multicast
// groups, fills the tables and sets the registers' initial values;
// CounterScript renders the script that reads the translator's counters
// and PSNs back, which ParseCounters reads. Spec is a translator's YAML
// file, which names each collector's exchange instead of its endpoint and
// regions, and Controller runs it (`appliance dta tofino`): it takes the
// rest from the collectors through the software translator's exchange,
// loads the script with bfshell and serves the counters.
//
// What the Tofino translator does differently from the software one (the
// programs' header comments say why):
//   - Key-Write and Key-Increment replicate a report into N copies with
//     multicast groups the control plane makes per (collector, N), N up to
//     MaxRedundancy (4; 8 in software). Slot n uses the CRC polynomial
//     translator/dtatranslator uses for n (IEEE, Castagnoli, Koopman, CRC-32Q) as a
//     TNA CRCPolynomial, so both translators write the same slots; a test
//     runs the polynomials declared in translator.p4 against dta.Slot.
//   - Key-Write data is 4 bytes; immediate reports are written without
//     immediate; FETCH_ADDs are not kept within the collector's responder
//     resources.
//   - Append writes B entries per WRITE, B fixed when the program is
//     compiled (-DDTA_APPEND_BATCH=B, 1, 2 or 4; Translator.AppendBatch
//     names the build; the default build has DefaultAppendBatch, 4, the
//     software translator's default). With B > 1 the
//     ingress gathers a list's entries in registers, as the paper does,
//     and the report that completes a batch carries the others to the
//     egress, which writes them with one WRITE. The entries sit where the
//     software translator with the same batch puts them ({data, sequence}
//     at head mod entries), so pollers read either translator's lists
//     alike. Unlike the software translator, a batch waiting for its last
//     entries is never flushed early (a data plane has no timer).
//   - Postcarder records have PostcardHops (5) hops and are written when
//     every hop has reported; a flow evicted from the PostcardCache-flow
//     cache before that is counted, not written, and there is no flush
//     timer.
//   - Sketch-Merge is in the build with -DDTA_SKETCH_MERGE
//     (Translator.SketchMerge), for sketches of SketchRows (2) rows,
//     at most SketchReporters (16) reporters and a group of one column
//     (dtamem.SketchRegion.Group 1): the ingress merges, in registers of
//     its own pipe (every reporter of a sketch must come in on one
//     pipe), and the column's last report carries the merged counters to
//     the egress, which writes the column as an 8-byte entry. On Tofino 1
//     the build fits without sequence numbers and the rate meter
//     (-DDTA_SKETCH_MERGE -DDTA_NO_SEQNUM -DDTA_NO_METER, NoMeter); with
//     them it fits Tofino 2 only. A reporter a
//     round ahead is refused as in software, but its expected column
//     has moved on (the switch reads it before the column's reporters),
//     so its next reports are refused until its round comes back;
//     the software translator keeps expecting the refused column.
//     Out-of-order columns and duplicates are both counted as SK_ORDER
//     (the software translator drops a duplicate silently).
//   - The ICRC is computed in the data plane from a per-collector prefix
//     state: the control plane runs the CRC over the headers that are the
//     same in every packet of a shape to a collector (icrc.go) and
//     installs it with the connection; the egress hashes what varies.
//     A Go model of the egress (icrc_test.go) builds the same packets, ICRC
//     included, as the software translator, byte for byte. The AckReq bit
//     (every PSN that is a multiple of 64) comes from a register of its
//     own, ack_phase, which the script sets from the first PSN.
//   - Reporter tracking follows translator/dtatranslator's SeqTracker: a gap bounces
//     the report back as a NACK of the expected number, a duplicate as a
//     cumulative ACK, and every 16th in-order report is ACKed through an
//     ingress mirror session when the reporter asks for ACKs. Unlike the
//     software tracker, the first expected number is the control plane's
//     (Peer.FirstSeq), NACKs are not spaced by an interval, every 16th
//     ACK goes by sequence number rather than by count. The answer is the
//     software translator's datagram (UDP 40044 -> 40044, DF, with the UDP
//     checksum; a mirrored ACK's checksum is 0), written over the report:
//     the report's bytes the parser did not take stay behind it as link
//     padding. As in software, a report that does not parse (unknown
//     opcode, N outside 1..8) moves no sequence number. The reporter
//     program counts the answers but keeps no reports to resend.
//   - Flow control (Translator.FlowControl; off without it, absent from
//     the build with -DDTA_NO_METER, NoMeter): a meter per collector of
//     Rate reports a second with a burst of Burst, a report's priority
//     from its DSCP (high from HighDSCP), as the software translator's.
//     Over the meter a high-priority report goes untranslated to queue
//     CPUQueue of the switch CPU's port CPUPort, for the CPU to send it
//     back in (its resends skip the sequence check), and a low-priority
//     one is dropped without moving its reporter's expected number on,
//     so that a NACK has it resent; both are counted (Counters.Dropped
//     "to_cpu" and "metered"), and a tracked reporter with an ACK port
//     gets a congestion notice, at most one per 2^20 ns. Unlike the
//     software translator's, the meter counts reports, not the RDMA
//     packets they make (a Key-Write of N = 2 takes one token, not two),
//     duplicates and gaps take a token too, only red reports wait (the
//     software translator queues every report while one waits), and a
//     report the full CPU queue drops is lost (the software translator
//     refuses it, and its reporter resends it). CPUAgent is the switch
//     CPU's side: it reads the queue and sends the reports back in.
//   - Postcard outcomes are counted in postcard_events (held, complete,
//     bad hop) and evictions in postcard_evictions: the postcard that
//     evicts a flow is held too, and a Tofino counter takes one count per
//     packet. ParseCounters reports both under Counters.Postcards.
//
// The tests check every name the scripts use against the P4 sources and
// against bf-p4c's bfrt.json of the build each script loads, run p4c's
// front end on both programs (with and without -DDTA_NO_SEQNUM), hold the
// egress to a Go model that sends what the software translator sends, and
// replay P4Testgen's tests of the programs against the software
// translator's parts that decide the same things (see
// TestSTFTranslator; make p4check compiles every build with bf-p4c and
// the README has the resources).
package dtatofino

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The programs' names in bfrt (bfrt.<name>.pipe...), the names bf-p4c
// gives them unless told otherwise.
const (
	DefaultTranslatorName = "translator"
	DefaultReporterName   = "reporter"
)

// Sizes of the P4 programs' tables and registers (their constants of the
// same names); a test checks the two agree.
const (
	CollectorSlots = 64   // COLLECTOR_SLOTS: collectors (tables, PSN registers)
	MaxRedundancy  = 4    // MAX_REDUNDANCY: N of Key-Write and Key-Increment
	GroupSlots     = 256  // GROUP_SLOTS: (collector, N) multicast groups
	ListSlots      = 1024 // LIST_SLOTS: Append lists over all collectors
	ReporterSlots  = 256  // REPORTER_SLOTS: reporters tracked
	PostcardHops   = 5    // POSTCARD_HOPS: hops of a postcard record
	PostcardCache  = 4096 // POSTCARD_CACHE: flows the postcard cache holds
	FwdSize        = 1024 // FWD_SIZE: routes
	RuleSize       = 512  // RULE_SIZE: a reporter's report rules
	AddrSize       = 16   // ADDR_SIZE: a reporter's own addresses
	PortSlots      = 512  // dev ports
	// Sketch-Merge (-DDTA_SKETCH_MERGE): SKETCH_SLOTS sketches,
	// SKETCH_REPORTER_SLOTS (sketch, reporter) pairs, SKETCH_CELLS columns
	// over all sketches, SKETCH_ROWS counters per column, and at most 32
	// reporters per sketch (a column's mask is 16 bits, which a gateway compares).
	SketchSlots         = 64
	SketchReporterSlots = 1024
	SketchCells         = 4096
	SketchRows          = 2
	SketchReporters     = 16
	// SketchColumnLen is a merged column's size, its WRITE's payload: an
	// 8-byte entry, which the egress writes as it writes a Key-Write's.
	SketchColumnLen = 4 * SketchRows
	// RecordLen is a postcard record's size (RECORD_LEN).
	RecordLen = 8 + 4*PostcardHops
	// EntryLen is the size of a Key-Write entry, a Key-Increment counter
	// and an Append entry alike.
	EntryLen = 8
	// DefaultSnap truncates the mirrored copies that become reports and
	// ACKs: they need their headers only.
	DefaultSnap = 128
)

// Port is a switch port the program uses.
type Port struct {
	// Name names the port in routes, collectors and reporters: letters,
	// digits, '_' and '-', starting with a letter.
	Name string `json:"name"`
	// FrontPanel is the port's cage and lane, "conn/chnl" such as "1/0";
	// the script resolves it to a dev port on the switch. When empty,
	// DevPort is the dev port.
	FrontPanel string `json:"front_panel,omitempty"`
	DevPort    int    `json:"dev_port,omitempty"`
	// Speed is 1G, 10G, 25G, 40G, 50G or 100G.
	Speed string `json:"speed"`
	// FEC is none, fc (Firecode) or rs (Reed-Solomon).
	FEC string `json:"fec"`
	// AutoNeg is default, on or off; empty means default.
	AutoNeg string `json:"autoneg,omitempty"`
	// MAC is the switch's address on the port: the source of what is
	// routed out of it.
	MAC header.MAC `json:"mac"`
}

// Route sends the packets for an IPv4 prefix out of Port to the next hop
// MAC.
type Route struct {
	Prefix netip.Prefix `json:"prefix"`
	Port   string       `json:"port"`
	MAC    header.MAC   `json:"mac"`
}

// Collector is one collector behind the translator: its RNIC's address
// and queue pair (connected to the translator's), and the memory regions
// it registered for each primitive (nil or empty when it serves none).
type Collector struct {
	Name string `json:"name"`
	// Port is the translator's port towards the collector.
	Port string     `json:"port"`
	MAC  header.MAC `json:"mac"`
	IP   netip.Addr `json:"ip"`
	QPN  uint32     `json:"qpn"`
	// PSN is the first PSN the collector's QP expects.
	PSN uint32 `json:"psn"`
	// UDPSrcPort is the RoCE packets' UDP source port (0: derived from
	// the QPNs as the software translator does).
	UDPSrcPort uint16 `json:"udp_src_port,omitempty"`
	// Redundancy is the largest N reporters ask for: groups for N = 1 to
	// it are made (0: MaxRedundancy).
	Redundancy   int                          `json:"redundancy,omitempty"`
	KeyWrite     *dtamem.KeyWriteRegion       `json:"key_write,omitempty"`
	KeyIncrement *dtamem.KeyIncrementRegion   `json:"key_increment,omitempty"`
	Postcards    *dtamem.PostcardRegion       `json:"postcards,omitempty"`
	Lists        map[uint32]dtamem.ListRegion `json:"lists,omitempty"`
	// Sketches are the Sketch-Merge sketches by sketch id (builds with
	// -DDTA_SKETCH_MERGE only).
	Sketches map[uint16]dtamem.SketchRegion `json:"sketches,omitempty"`
}

// Peer is a reporter the translator tracks the sequence numbers of
// (retransmittable reports from its address).
type Peer struct {
	Name string     `json:"name"`
	IP   netip.Addr `json:"ip"`
	// AckPort, when set, is the port in-order reports are ACKed out of
	// (the way back to the reporter); NACKs and duplicate ACKs leave
	// through the port the report came in on either way.
	AckPort string `json:"ack_port,omitempty"`
	// FirstSeq is the sequence number of the reporter's first
	// retransmittable report.
	FirstSeq uint8 `json:"first_seq,omitempty"`
}

// Translator is what translator.p4 runs.
type Translator struct {
	// Name is the P4 program's name in bfrt (DefaultTranslatorName when
	// empty).
	Name   string  `json:"name,omitempty"`
	Ports  []Port  `json:"ports"`
	Routes []Route `json:"routes"`
	// MAC is the source of the ACKs and NACKs to reporters.
	MAC header.MAC `json:"mac"`
	// IP and QPN are the translator's end of every collector connection:
	// the RoCE packets' source, and what the collectors' ACKs and NAKs
	// are addressed to.
	IP  netip.Addr `json:"ip"`
	QPN uint32     `json:"qpn"`
	// DSCP marks the RoCE packets (the lossless class towards the
	// collector).
	DSCP       uint8       `json:"dscp,omitempty"`
	Collectors []Collector `json:"collectors"`
	Peers      []Peer      `json:"peers,omitempty"`
	// NoSeqnum says the program was compiled with -DDTA_NO_SEQNUM: the
	// 2-byte base header, no reporter tracking.
	NoSeqnum bool `json:"no_seqnum,omitempty"`
	// AppendBatch is the program's -DDTA_APPEND_BATCH: the entries of one
	// Append WRITE, 1, 2 or 4 (0 means DefaultAppendBatch, the default
	// build's). Every list's entries are then a multiple of it.
	AppendBatch int `json:"append_batch,omitempty"`
	// SketchMerge says the program was compiled with
	// -DDTA_SKETCH_MERGE: collectors may have sketches.
	SketchMerge bool `json:"sketch_merge,omitempty"`
	// FlowControl, when set, turns the rate meter on and configures it
	// and the CPU queue; without it every report is translated as it
	// comes (the meter is off).
	FlowControl *FlowControl `json:"flow_control,omitempty"`
	// NoMeter says the program was compiled with -DDTA_NO_METER: no rate
	// meter, no flow control.
	NoMeter bool `json:"no_meter,omitempty"`
	// AckSnap truncates the mirrored copies that become ACKs
	// (DefaultSnap when 0).
	AckSnap int `json:"ack_snap,omitempty"`
}

// FlowControl is translator.p4's rate meter (in every build but
// -DDTA_NO_METER's), the
// software translator's flow-control (translator/dtatranslator.FlowSpec)
// on the switch: each collector's meter lets Rate reports a second
// through with a burst of Burst; beyond it a high-priority report (DSCP at
// least HighDSCP) waits, untranslated, in queue CPUQueue of the switch
// CPU's port CPUPort for the CPU to send it back in, and a low-priority
// one is dropped and counted (drop_reports "to_cpu" and "metered"). The
// switch's meter counts reports where the software translator's counts
// the RDMA packets they make (N for a Key-Write or Key-Increment): see
// the package doc.
type FlowControl struct {
	// Rate is reports a second per collector (at least 1).
	Rate uint64 `json:"rate"`
	// Burst is the meter's bucket in reports (0: DefaultBurst).
	Burst uint64 `json:"burst,omitempty"`
	// HighDSCP: reports whose DSCP is at least this are high priority
	// (0: DefaultHighDSCP).
	HighDSCP int `json:"high_dscp,omitempty"`
	// CPUPort is the dev port of the switch CPU (its PCIe port, 64 or
	// 320 on Tofino 1, 0 on Tofino 2, or one of its Ethernet ports);
	// CPUQueue is the queue there that high-priority reports wait in.
	CPUPort  int `json:"cpu_port"`
	CPUQueue int `json:"cpu_queue,omitempty"`
}

// The software translator's defaults (translator/dtatranslator's
// FlowSpec), and the queues a port has on Tofino 1 (QueueId_t is 5
// bits there).
const (
	DefaultBurst    = 256
	DefaultHighDSCP = 46
	CPUQueues       = 32
)

func (f *FlowControl) burst() uint64 {
	if f.Burst == 0 {
		return DefaultBurst
	}
	return f.Burst
}

func (f *FlowControl) highDSCP() int {
	if f.HighDSCP == 0 {
		return DefaultHighDSCP
	}
	return f.HighDSCP
}

// check names the first bad field of the flow control.
func (f *FlowControl) check() error {
	if f.Rate == 0 {
		return bad("flow_control.rate", "0: the meter needs a rate in reports a second (leave flow_control out for none)")
	}
	if f.HighDSCP < 0 || f.HighDSCP > 63 {
		return bad("flow_control.high_dscp", "%d: a DSCP is 0..63", f.HighDSCP)
	}
	if f.CPUPort < 0 || f.CPUPort >= bfrt.DevPorts || f.CPUPort&127 >= 72 {
		return bad("flow_control.cpu_port", "%d is not a Tofino dev port (pipe*128 + 0..71)", f.CPUPort)
	}
	if f.CPUQueue < 0 || f.CPUQueue >= CPUQueues {
		return bad("flow_control.cpu_queue", "%d: a port's queue is 0..%d", f.CPUQueue, CPUQueues-1)
	}
	return nil
}

// Rule says which forwarded packets a reporter reports on, and how.
type Rule struct {
	// Prefix matches the packets' IPv4 destination.
	Prefix netip.Prefix `json:"prefix"`
	// Protocol matches the IP protocol; 0 matches any.
	Protocol uint8 `json:"protocol,omitempty"`
	// Primitive is Key-Write, Key-Increment, Postcarder or Append.
	Primitive dtawire.Opcode `json:"primitive"`
	// Redundancy is N of Key-Write and Key-Increment (1..MaxRedundancy).
	Redundancy uint8 `json:"redundancy,omitempty"`
	// ListID is Append's list.
	ListID          uint32 `json:"list_id,omitempty"`
	Immediate       bool   `json:"immediate,omitempty"`
	Retransmittable bool   `json:"retransmittable,omitempty"`
	// Collector is the address the reports go to (the translator in
	// front of it takes them).
	Collector netip.Addr `json:"collector"`
}

// Reporter is what reporter.p4 runs.
type Reporter struct {
	// Name is the P4 program's name in bfrt (DefaultReporterName when
	// empty).
	Name   string  `json:"name,omitempty"`
	Ports  []Port  `json:"ports"`
	Routes []Route `json:"routes"`
	// Addrs are the switch's own addresses: the first is the reports'
	// source, and the translator's ACKs and NACKs come to any of them.
	Addrs []netip.Addr `json:"addrs"`
	// ReportPort leads to the translator; NextHopMAC is the next hop on
	// it.
	ReportPort string     `json:"report_port"`
	NextHopMAC header.MAC `json:"next_hop_mac"`
	// Hop is the switch's hop index on the paths it reports postcards for
	// (0..PostcardHops-1).
	Hop uint8 `json:"hop"`
	// FirstSeq is the first retransmittable report's sequence number.
	FirstSeq uint8 `json:"first_seq,omitempty"`
	// NoSeqnum says the program was compiled with -DDTA_NO_SEQNUM.
	NoSeqnum bool `json:"no_seqnum,omitempty"`
	// Snap truncates the mirrored copies that become reports
	// (DefaultSnap when 0).
	Snap  int    `json:"snap,omitempty"`
	Rules []Rule `json:"rules"`
}

// ErrProgram is wrapped by every validation error; the message names the
// field at fault, as in "collectors[1].key_write.slots".
var ErrProgram = errors.New("dta: bad program")

func bad(field, format string, a ...any) error { return bfrt.Bad(ErrProgram, field, format, a...) }

func pow2(n uint64) bool { return n > 0 && n&(n-1) == 0 }

func unicastMAC(m header.MAC) bool { return !m.IsZero() && !m.IsMulticast() }

// checkPorts validates ports and returns them by name.
func checkPorts(ports []Port) (map[string]*Port, error) {
	specs := make([]bfrt.Port, len(ports))
	for i, pt := range ports {
		specs[i] = bfrt.Port(pt)
	}
	err := bfrt.CheckPorts(ErrProgram, specs, func(i int, f string) error {
		if !unicastMAC(ports[i].MAC) {
			return bad(f+".mac", "%v: a port needs a unicast MAC", ports[i].MAC)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := map[string]*Port{}
	for i := range ports {
		out[ports[i].Name] = &ports[i]
	}
	return out, nil
}

func checkRoutes(routes []Route, ports map[string]*Port) error {
	seen := map[netip.Prefix]int{}
	for i, r := range routes {
		f := fmt.Sprintf("routes[%d]", i)
		if !r.Prefix.IsValid() || !r.Prefix.Addr().Is4() {
			return bad(f+".prefix", "%v is not an IPv4 prefix", r.Prefix)
		}
		if r.Prefix != r.Prefix.Masked() {
			return bad(f+".prefix", "%v has host bits set (%v)", r.Prefix, r.Prefix.Masked())
		}
		if j, dup := seen[r.Prefix]; dup {
			return bad(f+".prefix", "%v is routed by routes[%d] too", r.Prefix, j)
		}
		seen[r.Prefix] = i
		if _, ok := ports[r.Port]; !ok {
			return bad(f+".port", "%q is not in ports", r.Port)
		}
		if !unicastMAC(r.MAC) {
			return bad(f+".mac", "%v: the next hop needs a unicast MAC", r.MAC)
		}
	}
	if len(routes) > FwdSize {
		return bad("routes", "%d routes: ipv4_fwd holds %d", len(routes), FwdSize)
	}
	return nil
}

// region is a memory region as translator.p4 addresses it.
type region struct {
	addr     uint64
	rkey     uint32
	slots    uint64 // entries
	entryLen uint64
}

func (r region) hi() uint32   { return uint32(r.addr >> 32) }
func (r region) lo() uint32   { return uint32(r.addr) }
func (r region) mask() uint64 { return r.slots - 1 }

// check: a power of two of entries, and within one 4 GiB window, because
// translator.p4 adds offsets to the low 32 bits of the address only.
func (r region) check(f string) error {
	if !pow2(r.slots) {
		return bad(f, "%d entries: a power of two", r.slots)
	}
	end := uint64(r.lo()) + r.slots*r.entryLen
	if r.slots > 1<<32 || end > 1<<32 {
		return bad(f, "%#x + %d x %d B crosses a 4 GiB boundary: the translator adds offsets to the low 32 address bits",
			r.addr, r.slots, r.entryLen)
	}
	return nil
}

// listRef is one Append list in table order.
type listRef struct {
	coll int
	id   uint32
	reg  dtamem.ListRegion
}

// sketchRef is one Sketch-Merge sketch in table order: its first cell in
// the column registers and its first slot in sketch_next.
type sketchRef struct {
	coll int
	id   uint16
	reg  dtamem.SketchRegion
	cell int
	slot int
}

// tplan is a validated translator.
type tplan struct {
	t        *Translator
	ports    map[string]*Port
	lists    []listRef
	sketches []sketchRef
	acks     []string       // ACK ports in session order
	ackSID   map[string]int // port -> mirror session
	// offered: the collectors' exchanged values are checked too.
	offered bool
}

func (c *Collector) redundancy() int {
	if c.Redundancy == 0 {
		return MaxRedundancy
	}
	return c.Redundancy
}

func (t *Translator) udpSrcPort(c *Collector) uint16 {
	if c.UDPSrcPort != 0 {
		return c.UDPSrcPort
	}
	return roce.FlowLabelToUDPSrcPort(roce.FlowLabelFromQPNs(t.QPN, c.QPN))
}

// DefaultAppendBatch is the Append batch of translator.p4's default
// build (DTA_APPEND_BATCH), as the software translator's
// (dtamem.Regions.BatchEntries).
const DefaultAppendBatch = 4

// appendBatch is B, the entries of one Append WRITE.
func (t *Translator) appendBatch() int {
	if t.AppendBatch == 0 {
		return DefaultAppendBatch
	}
	return t.AppendBatch
}

func (t *Translator) ackSnap() int {
	if t.AckSnap == 0 {
		return DefaultSnap
	}
	return t.AckSnap
}

// Validate checks the translator; the error names the first bad field.
func (t Translator) Validate() error {
	_, err := t.plan(true)
	return err
}

// ValidateSetup checks what the translator's operator writes, before the
// collectors are asked for the rest: everything Validate checks but each
// collector's MAC, IP, QPN, PSN and regions, which come from the
// collector's exchange. The error names the first bad field.
func (t Translator) ValidateSetup() error {
	_, err := t.plan(false)
	return err
}

// plan validates the translator in the order its parts depend on each
// other (ports before the routes, collectors and peers that name them),
// so that the error names the first bad field. Without offered, the
// collectors' exchanged values are not checked (ValidateSetup).
func (t *Translator) plan(offered bool) (*tplan, error) {
	if !bfrt.IsIdentifier(bfrt.ProgName(t.Name, DefaultTranslatorName)) {
		return nil, bad("name", "%q is not a P4 identifier", t.Name)
	}
	ports, err := checkPorts(t.Ports)
	if err != nil {
		return nil, err
	}
	if err := checkRoutes(t.Routes, ports); err != nil {
		return nil, err
	}
	pl := &tplan{t: t, ports: ports, ackSID: map[string]int{}, offered: offered}
	if err := t.checkRoCE(); err != nil {
		return nil, err
	}
	if err := pl.checkCollectors(); err != nil {
		return nil, err
	}
	if err := pl.checkPeers(); err != nil {
		return nil, err
	}
	if f := t.FlowControl; f != nil {
		if t.NoMeter {
			return nil, bad("flow_control", "the build without the meter (no_meter) has no flow control")
		}
		if err := f.check(); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// checkRoCE checks the translator's own RoCE endpoint (the MAC, IPv4
// address and QPN its WRITEs come from) and the ACK mirror's snap length.
func (t *Translator) checkRoCE() error {
	if !unicastMAC(t.MAC) {
		return bad("mac", "%v: the translator needs a unicast MAC", t.MAC)
	}
	if !t.IP.Is4() {
		return bad("ip", "%v: the translator's RoCE address is IPv4", t.IP)
	}
	if t.QPN > roce.QPNMask || t.QPN < 2 {
		return bad("qpn", "%#x: a 24-bit QPN from 2", t.QPN)
	}
	if t.DSCP > 63 {
		return bad("dscp", "%d: 0..63", t.DSCP)
	}
	if s := t.AckSnap; s != 0 && (s < 64 || s > 16384) {
		return bad("ack_snap", "%d: 0 (default) or 64 to 16384 bytes", s)
	}
	if b := t.AppendBatch; b != 0 && b != 1 && b != 2 && b != 4 {
		return bad("append_batch", "%d: translator.p4 is built with a batch of 1, 2 or 4 (0 for %d)", b, DefaultAppendBatch)
	}
	return nil
}

// checkCollectors checks each collector and that the collectors, their
// redundancy groups and their Append lists fit the tables and registers.
func (pl *tplan) checkCollectors() error {
	t := pl.t
	if len(t.Collectors) == 0 {
		return bad("collectors", "no collectors")
	}
	if len(t.Collectors) > CollectorSlots {
		return bad("collectors", "%d collectors: the tables hold %d", len(t.Collectors), CollectorSlots)
	}
	names := map[string]int{}
	ips := map[netip.Addr]int{}
	groups := 0
	for i := range t.Collectors {
		c := &t.Collectors[i]
		f := fmt.Sprintf("collectors[%d]", i)
		if err := pl.checkCollector(f, i, names, ips); err != nil {
			return err
		}
		if !pl.offered {
			continue
		}
		served, err := pl.checkRegions(f, i)
		if err != nil {
			return err
		}
		if !served {
			return bad(f, "%q has no region: it would receive nothing", c.Name)
		}
		if c.KeyWrite != nil || c.KeyIncrement != nil {
			groups += c.redundancy()
		}
	}
	if groups > GroupSlots {
		return bad("collectors", "%d multicast groups: redundancy_group holds %d", groups, GroupSlots)
	}
	if len(pl.lists) > ListSlots {
		return bad("collectors", "%d Append lists: the list registers hold %d", len(pl.lists), ListSlots)
	}
	return pl.checkSketchTotals()
}

// checkSketches checks collector i's Sketch-Merge sketches against what
// translator.p4 merges and adds them to the plan in sketch id order.
func (pl *tplan) checkSketches(f string, i int) error {
	c := &pl.t.Collectors[i]
	if len(c.Sketches) > 0 && !pl.t.SketchMerge {
		return bad(f+".sketches", "translator.p4 merges sketches only when built with -DDTA_SKETCH_MERGE (sketch_merge: true)")
	}
	ids := make([]uint16, 0, len(c.Sketches))
	for id := range c.Sketches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := c.Sketches[id]
		g := fmt.Sprintf("%s.sketches[%d]", f, id)
		if err := s.Validate(); err != nil {
			return bad(g, "%v", err)
		}
		if s.Rows != SketchRows {
			return bad(g+".rows", "%d: translator.p4's columns have %d rows", s.Rows, SketchRows)
		}
		if s.Reporters > SketchReporters {
			return bad(g+".reporters", "%d: translator.p4's column masks hold %d reporters", s.Reporters, SketchReporters)
		}
		if s.GroupColumns() != 1 {
			return bad(g+".group", "%d columns a WRITE: translator.p4 writes each column as it completes (group: 1)", s.GroupColumns())
		}
		if s.Columns > SketchCells {
			return bad(g+".columns", "%d: the column registers hold %d", s.Columns, SketchCells)
		}
		if err := (region{s.Addr, s.RKey, uint64(s.Columns), SketchColumnLen}).check(g + ".columns"); err != nil {
			return err
		}
		ref := sketchRef{coll: i, id: id, reg: s}
		if n := len(pl.sketches); n > 0 {
			last := pl.sketches[n-1]
			ref.cell = last.cell + int(last.reg.Columns)
			ref.slot = last.slot + last.reg.Reporters
		}
		pl.sketches = append(pl.sketches, ref)
	}
	return nil
}

// checkSketchTotals checks that the sketches fit translator.p4's tables
// and registers together.
func (pl *tplan) checkSketchTotals() error {
	if len(pl.sketches) > SketchSlots {
		return bad("collectors", "%d sketches: the sketch tables hold %d", len(pl.sketches), SketchSlots)
	}
	if n := len(pl.sketches); n > 0 {
		last := pl.sketches[n-1]
		if cells := last.cell + int(last.reg.Columns); cells > SketchCells {
			return bad("collectors", "%d sketch columns: the column registers hold %d", cells, SketchCells)
		}
		if slots := last.slot + last.reg.Reporters; slots > SketchReporterSlots {
			return bad("collectors", "%d (sketch, reporter) pairs: sketch_reporter holds %d", slots, SketchReporterSlots)
		}
	}
	return nil
}

// checkCollector checks collector i: a unique name, a port, its RDMA
// endpoint when offered (checkEndpoint) and a redundancy the multicast
// groups allow.
func (pl *tplan) checkCollector(f string, i int, names map[string]int, ips map[netip.Addr]int) error {
	c := &pl.t.Collectors[i]
	if !bfrt.IsName(c.Name) {
		return bad(f+".name", "%q: letters, digits, '_' and '-', starting with a letter", c.Name)
	}
	if j, dup := names[c.Name]; dup {
		return bad(f+".name", "%q is collectors[%d] too", c.Name, j)
	}
	names[c.Name] = i
	if _, ok := pl.ports[c.Port]; !ok {
		return bad(f+".port", "%q is not in ports", c.Port)
	}
	if pl.offered {
		if err := pl.checkEndpoint(f, i, ips); err != nil {
			return err
		}
	}
	if c.Redundancy < 0 || c.Redundancy > MaxRedundancy {
		return bad(f+".redundancy", "%d: 1..%d (0 for %d)", c.Redundancy, MaxRedundancy, MaxRedundancy)
	}
	return nil
}

// checkEndpoint checks what collector i's exchange gives: a unicast MAC,
// an IPv4 address other than the translator's and the other collectors',
// a QPN and a PSN.
func (pl *tplan) checkEndpoint(f string, i int, ips map[netip.Addr]int) error {
	t, c := pl.t, &pl.t.Collectors[i]
	if !unicastMAC(c.MAC) {
		return bad(f+".mac", "%v: the collector's RNIC needs a unicast MAC", c.MAC)
	}
	if !c.IP.Is4() {
		return bad(f+".ip", "%v: collectors are reached over IPv4", c.IP)
	}
	if c.IP == t.IP {
		return bad(f+".ip", "%v is the translator's own address", c.IP)
	}
	if j, dup := ips[c.IP]; dup {
		return bad(f+".ip", "%v is collectors[%d]'s too", c.IP, j)
	}
	ips[c.IP] = i
	if c.QPN > roce.QPNMask || c.QPN < 2 {
		return bad(f+".qpn", "%#x: a 24-bit QPN from 2", c.QPN)
	}
	if c.PSN > roce.PSNMask {
		return bad(f+".psn", "%#x is not a 24-bit PSN", c.PSN)
	}
	return nil
}

// checkRegions checks collector i's memory regions, one per DTA primitive
// it serves, as translator.p4 lays its records out, and adds its Append
// lists to the plan in list id order. served says whether it has any.
func (pl *tplan) checkRegions(f string, i int) (served bool, err error) {
	c := &pl.t.Collectors[i]
	if kw := c.KeyWrite; kw != nil {
		served = true
		if kw.DataWidth != 0 && kw.DataWidth != 4 {
			return false, bad(f+".key_write.data_width", "%d: translator.p4 writes 4-byte data", kw.DataWidth)
		}
		if err := (region{kw.Addr, kw.RKey, kw.Slots, EntryLen}).check(f + ".key_write.slots"); err != nil {
			return false, err
		}
	}
	if ki := c.KeyIncrement; ki != nil {
		served = true
		if ki.Addr%8 != 0 {
			return false, bad(f+".key_increment.addr", "%#x: atomics need 8-byte alignment", ki.Addr)
		}
		if err := (region{ki.Addr, ki.RKey, ki.Slots, EntryLen}).check(f + ".key_increment.slots"); err != nil {
			return false, err
		}
	}
	if pc := c.Postcards; pc != nil {
		served = true
		if err := checkPostcards(f, pc); err != nil {
			return false, err
		}
	}
	ids := make([]uint32, 0, len(c.Lists))
	for id := range c.Lists {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		served = true
		l := c.Lists[id]
		if err := (region{l.Addr, l.RKey, l.Entries, dtamem.AppendEntryLen}).check(fmt.Sprintf("%s.lists[%d].entries", f, id)); err != nil {
			return false, err
		}
		// A batch is written whole: the ring holds whole batches.
		if b := uint64(pl.t.appendBatch()); l.Entries%b != 0 {
			return false, bad(fmt.Sprintf("%s.lists[%d].entries", f, id), "%d entries: a multiple of the Append batch %d", l.Entries, b)
		}
		pl.lists = append(pl.lists, listRef{coll: i, id: id, reg: l})
	}
	if len(c.Sketches) > 0 {
		served = true
	}
	return served, pl.checkSketches(f, i)
}

// checkPostcards checks a Postcarder region against translator.p4's fixed
// record (its hops) and cache sizes.
func checkPostcards(f string, pc *dtamem.PostcardRegion) error {
	if err := pc.Validate(); err != nil {
		return bad(f+".postcards", "%v", err)
	}
	if pc.Hops != PostcardHops {
		return bad(f+".postcards.hops", "%d: translator.p4's records have %d hops", pc.Hops, PostcardHops)
	}
	if pc.Cache != 0 && pc.Cache != PostcardCache {
		return bad(f+".postcards.cache", "%d: translator.p4's cache holds %d flows", pc.Cache, PostcardCache)
	}
	return (region{pc.Addr, pc.RKey, pc.Slots, RecordLen}).check(f + ".postcards.slots")
}

// checkPeers checks the reporters whose sequence numbers the translator
// tracks, and gives each port that ACKs go out of a mirror session, in
// port name order.
func (pl *tplan) checkPeers() error {
	t := pl.t
	if t.NoSeqnum && len(t.Peers) > 0 {
		return bad("peers", "the 2-byte base header (no_seqnum) has no sequence numbers to track")
	}
	if len(t.Peers) > ReporterSlots {
		return bad("peers", "%d reporters: the registers hold %d", len(t.Peers), ReporterSlots)
	}
	peerIPs := map[netip.Addr]int{}
	for i, p := range t.Peers {
		f := fmt.Sprintf("peers[%d]", i)
		if !p.IP.Is4() {
			return bad(f+".ip", "%v: reporters are IPv4", p.IP)
		}
		if j, dup := peerIPs[p.IP]; dup {
			return bad(f+".ip", "%v is peers[%d]'s too", p.IP, j)
		}
		peerIPs[p.IP] = i
		if p.AckPort != "" {
			if _, ok := pl.ports[p.AckPort]; !ok {
				return bad(f+".ack_port", "%q is not in ports", p.AckPort)
			}
			if _, ok := pl.ackSID[p.AckPort]; !ok {
				pl.acks = append(pl.acks, p.AckPort)
				pl.ackSID[p.AckPort] = 0
			}
		}
	}
	slices.Sort(pl.acks)
	for i, p := range pl.acks {
		pl.ackSID[p] = i + 1
	}
	return nil
}

// rplan is a validated reporter.
type rplan struct {
	r     *Reporter
	ports map[string]*Port
}

func (r *Reporter) snap() int {
	if r.Snap == 0 {
		return DefaultSnap
	}
	return r.Snap
}

// Validate checks the reporter; the error names the first bad field.
func (r Reporter) Validate() error {
	_, err := r.plan()
	return err
}

func (r *Reporter) plan() (*rplan, error) {
	if !bfrt.IsIdentifier(bfrt.ProgName(r.Name, DefaultReporterName)) {
		return nil, bad("name", "%q is not a P4 identifier", r.Name)
	}
	ports, err := checkPorts(r.Ports)
	if err != nil {
		return nil, err
	}
	if err := checkRoutes(r.Routes, ports); err != nil {
		return nil, err
	}
	if len(r.Addrs) == 0 {
		return nil, bad("addrs", "no address: reports need a source")
	}
	if len(r.Addrs) > AddrSize {
		return nil, bad("addrs", "%d addresses: own_addr holds %d", len(r.Addrs), AddrSize)
	}
	seen := map[netip.Addr]bool{}
	for i, a := range r.Addrs {
		if !a.Is4() {
			return nil, bad(fmt.Sprintf("addrs[%d]", i), "%v is not IPv4", a)
		}
		if seen[a] {
			return nil, bad(fmt.Sprintf("addrs[%d]", i), "%v listed twice", a)
		}
		seen[a] = true
	}
	if _, ok := ports[r.ReportPort]; !ok {
		return nil, bad("report_port", "%q is not in ports", r.ReportPort)
	}
	if !unicastMAC(r.NextHopMAC) {
		return nil, bad("next_hop_mac", "%v: the next hop needs a unicast MAC", r.NextHopMAC)
	}
	if r.Hop >= PostcardHops {
		return nil, bad("hop", "%d: postcard records hold hops 0..%d", r.Hop, PostcardHops-1)
	}
	if s := r.Snap; s != 0 && (s < 64 || s > 16384) {
		return nil, bad("snap", "%d: 0 (default) or 64 to 16384 bytes", s)
	}
	if len(r.Rules) > RuleSize {
		return nil, bad("rules", "%d rules: report_rule holds %d", len(r.Rules), RuleSize)
	}
	type match struct {
		p     netip.Prefix
		proto uint8
	}
	matches := map[match]int{}
	for i, ru := range r.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		if !ru.Prefix.IsValid() || !ru.Prefix.Addr().Is4() {
			return nil, bad(f+".prefix", "%v is not an IPv4 prefix", ru.Prefix)
		}
		if ru.Prefix != ru.Prefix.Masked() {
			return nil, bad(f+".prefix", "%v has host bits set (%v)", ru.Prefix, ru.Prefix.Masked())
		}
		m := match{ru.Prefix, ru.Protocol}
		if j, dup := matches[m]; dup {
			return nil, bad(f+".prefix", "rules[%d] matches the same packets first", j)
		}
		matches[m] = i
		switch ru.Primitive {
		case dtawire.OpKeyWrite, dtawire.OpKeyIncrement:
			if ru.Redundancy < 1 || ru.Redundancy > MaxRedundancy {
				return nil, bad(f+".redundancy", "%d: 1..%d", ru.Redundancy, MaxRedundancy)
			}
		case dtawire.OpPostcarder, dtawire.OpAppend:
			if ru.Redundancy != 0 {
				return nil, bad(f+".redundancy", "%d: only Key-Write and Key-Increment have one", ru.Redundancy)
			}
		default:
			return nil, bad(f+".primitive", "%v: reporter.p4 makes Key-Write, Key-Increment, Postcarder and Append reports", ru.Primitive)
		}
		if ru.ListID != 0 && ru.Primitive != dtawire.OpAppend {
			return nil, bad(f+".list_id", "%d: only Append has a list", ru.ListID)
		}
		if !ru.Collector.Is4() {
			return nil, bad(f+".collector", "%v: collectors are IPv4", ru.Collector)
		}
		if r.NoSeqnum && ru.Retransmittable {
			return nil, bad(f+".retransmittable", "the 2-byte base header (no_seqnum) has no sequence number to resend by")
		}
	}
	return &rplan{r: r, ports: ports}, nil
}

func (pl *tplan) sortedPorts() []*Port { return sortedPorts(pl.t.Ports) }

func sortedPorts(ports []Port) []*Port {
	out := make([]*Port, 0, len(ports))
	for i := range ports {
		out = append(out, &ports[i])
	}
	slices.SortFunc(out, func(a, b *Port) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// groupID is the multicast group of N copies for collector c; nodeID is
// the node of copy n in it. Groups and nodes count from 1.
func groupID(c, n int) int { return 1 + c*MaxRedundancy + (n - 1) }

func nodeID(group, copy int) int { return (group-1)*MaxRedundancy + copy + 1 }
