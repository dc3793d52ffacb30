// Package hawkeyewire is Hawkeye's contract between the switches and the
// analyzer (PFC-aware telemetry and in-network causality tracing, SIGCOMM
// 2025): the polling packet that hosts and switches send along the victim
// path and up PFC causality, and the telemetry records (per epoch: flows,
// ports, port pairs, PFC meters) that the switches' CPU pollers report and
// collector/hawkeyeanalyzer reads as JSON. The switch program that writes
// them runs in the fabric simulator (bench/hawkeyesim) and on Tofino
// (p4/hawkeyetofino); the host agent (appliance/hawkeyeagent) sends polls.
package hawkeyewire

// FlowKey is a flow's 5-tuple as the switch hashes it (for RoCEv2 the UDP
// ports: the public P4 hashed TCP ports, so RoCE flows collided).
type FlowKey struct {
	Src   uint32 `json:"src"` // IPv4, host order
	Dst   uint32 `json:"dst"`
	Sport uint16 `json:"sport"`
	Dport uint16 `json:"dport"`
	Proto uint8  `json:"proto"`
}

// FlowRecord is one flow's counters at one switch in one epoch.
type FlowRecord struct {
	Key FlowKey `json:"key"`
	// In and Out are the flow's ingress and egress ports at the switch.
	In  int `json:"in"`
	Out int `json:"out"`
	// Packets enqueued, the sum of the egress queue depth (bytes) each
	// saw at enqueue, and how many of them were enqueued while their
	// egress was paused.
	Packets   uint32 `json:"packets"`
	QdepthSum uint64 `json:"qdepth_sum"`
	Paused    uint32 `json:"paused"`
}

// PortRecord is one egress port's counters in one epoch.
type PortRecord struct {
	Port int `json:"port"`
	// Packets enqueued, of them Paused while the port was paused, the
	// queue-depth sum at enqueue.
	Packets   uint32 `json:"packets"`
	Paused    uint32 `json:"paused"`
	QdepthSum uint64 `json:"qdepth_sum"`
	// PauseFrames is how many PFC XOFF frames the port received (from its
	// downstream neighbour); PausedNow and PauseLeftNs are its PFC status
	// when the poller read it (the pause timer set from the quanta).
	PauseFrames uint32 `json:"pause_frames"`
	PausedNow   bool   `json:"paused_now"`
	PauseLeftNs int64  `json:"pause_left_ns"`
	// PauseSent is how many XOFF frames the switch sent out of this port
	// (upstream, because its ingress queue from there passed XOFF): the
	// MAC's transmitted-PFC counter. It says that a queue of this switch
	// paused its neighbour even when the neighbour is not polled.
	PauseSent uint32 `json:"pause_sent,omitempty"`
}

// MeterRecord is a port-pair traffic meter: bytes that came in on In and
// were queued out of Out in the epoch (PFC causality: which upstream
// ports feed a paused egress).
type MeterRecord struct {
	In    int    `json:"in"`
	Out   int    `json:"out"`
	Bytes uint64 `json:"bytes"`
}

// SwitchReport is what a switch's CPU poller sends for one polling event:
// the epochs it read, with empty entries dropped.
type SwitchReport struct {
	Switch string `json:"switch"`
	// Epochs are the epochs read, oldest first.
	Epochs []EpochReport `json:"epochs"`
	// Evicted are flows that lost their register slot to a colliding
	// flow during the epochs read and went to the CPU instead.
	Evicted []FlowRecord `json:"evicted,omitempty"`
	// Truncated is set when reports were cut (the MTU-packed report lost
	// packets, or a register ran out of room).
	Truncated bool `json:"truncated,omitempty"`
	// Bytes is the size of the report on the wire: what collection cost.
	Bytes int `json:"bytes"`
	// Packets is how many report packets carried it (MTU-packed).
	Packets int `json:"packets,omitempty"`
}

// EpochReport is one epoch of a switch's registers.
type EpochReport struct {
	ID     uint32        `json:"id"`
	Start  int64         `json:"start_ns"`
	Ports  []PortRecord  `json:"ports"`
	Flows  []FlowRecord  `json:"flows"`
	Meters []MeterRecord `json:"meters"`
}

// Link is one link of the topology as the analyzer sees it: switch ports
// joined to switch ports or to hosts (Host set, B empty).
type Link struct {
	A     string `json:"a"`
	APort int    `json:"a_port"`
	B     string `json:"b,omitempty"`
	BPort int    `json:"b_port,omitempty"`
	Host  string `json:"host,omitempty"` // when A's port leads to a host
}

// Telemetry is one incident: the polling event, the victim, the topology
// and every report collected.
type Telemetry struct {
	Event  uint8   `json:"event"`
	Victim FlowKey `json:"victim"`
	Time   int64   `json:"time_ns"`
	// Hosts map host names to their IPv4 addresses (host order).
	Hosts   map[string]uint32 `json:"hosts"`
	Links   []Link            `json:"links"`
	Reports []SwitchReport    `json:"reports"`
}
