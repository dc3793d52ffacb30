package lumina

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// EventRun is one test through the testbed: traffic with event intents,
// captured, merged and checked.
type EventRun struct {
	Traffic   *trafficgen.Result `json:"traffic"`
	Entries   []intent.Entry     `json:"entries"`
	Hits      []uint64           `json:"hits"`
	Capture   *Capture           `json:"capture"`
	Trace     *trace.Report      `json:"trace"`
	Events    EventCheck         `json:"events"`
	Requester map[string]uint64  `json:"requester_counters"`
	Responder map[string]uint64  `json:"responder_counters"`
	// IntegrityErr is the integrity check's verdict (nil: a valid test).
	IntegrityErr error `json:"-"`
	// TrafficErr says which messages completed in error, when some did.
	TrafficErr error `json:"-"`
}

// EventCheck is what the merged trace says about the injected events.
type EventCheck struct {
	Packets uint64 `json:"packets"`
	// Marked counts the packets carrying each event type.
	Marked map[string]int `json:"marked"`
	// Retransmitted counts dropped or corrupted packets seen again later.
	Retransmitted int `json:"retransmitted"`
	// CNPs counts CNPs in the trace, ICRCDrops the responder's
	// rx_icrc_encapsulated.
	CNPs      int    `json:"cnps"`
	ICRCDrops uint64 `json:"icrc_drops"`
	// Intents is each data-pkt-events entry as the trace shows it.
	Intents []IntentCheck `json:"intents"`
	// Problems lists every way the trace departs from the intents.
	Problems []string `json:"problems,omitempty"`
}

// RunEvents starts a capture, runs the traffic with the intents loaded
// into the injector once the connections' metadata is known, stops the
// capture, merges the dumps into merged (a path) and checks the events.
// A failed integrity check is returned in EventRun.IntegrityErr, not as
// the error, which is for runs that could not be carried out.
func (tb *Testbed) RunEvents(ctx context.Context, p trafficgen.Params, intents []intent.Intent, merged string) (*EventRun, error) {
	return tb.Run(ctx, RunOptions{Params: p, Intents: intents, Merged: merged})
}

// RunOptions is one test for Testbed.Run.
type RunOptions struct {
	Params  trafficgen.Params
	Intents []intent.Intent
	// Merged is the path of the merged trace.
	Merged string
	// MultiGID puts each QP on its own GID of the RNICs' lists.
	MultiGID bool
}

// Run is RunEvents with every option. Messages that complete in error
// (the retries of a test that drops every retransmission run out) are
// an outcome of the test, not a failure to run it: the capture is still
// merged and checked.
func (tb *Testbed) Run(ctx context.Context, o RunOptions) (*EventRun, error) {
	p := o.Params.Defaults()
	if tb.Cfg.Virtual {
		p.Driver = tb
	}
	intents, merged := o.Intents, o.Merged
	g := intent.Geometry{Verb: p.Verb, MessageSize: p.MessageSize, MTU: p.MTU, NumMessages: p.MsgsPerQP}
	icrcBefore := tb.Req.Counter(soft.CntRxICRCEncapsulated) + tb.Resp.Counter(soft.CntRxICRCEncapsulated)
	if err := tb.StartCapture(); err != nil {
		return nil, err
	}
	run := &EventRun{}
	var err error
	req := trafficgen.Endpoint{Dev: tb.Req, GID: tb.Cfg.RequesterIP}
	resp := trafficgen.Endpoint{Dev: tb.Resp, GID: tb.Cfg.ResponderIP}
	if o.MultiGID {
		req.MultiGID = append([]netip.Addr{tb.Cfg.RequesterIP}, tb.Cfg.RequesterExtra...)
		resp.MultiGID = append([]netip.Addr{tb.Cfg.ResponderIP}, tb.Cfg.ResponderExtra...)
	}
	run.Traffic, err = trafficgen.Run(ctx, req, resp, p, func(conns []intent.Conn) error {
		es, err := tb.Injector.Load(intents, conns, g, intent.Options{SendConns: p.SendQPs})
		run.Entries = es
		return err
	})
	if errors.Is(err, trafficgen.ErrFailed) {
		run.TrafficErr, err = err, nil
	}
	// Let the last ACKs and their copies reach the dumpers.
	tb.settle(ctx)
	c, cerr := tb.StopCapture(ctx)
	run.Capture = c
	if err != nil {
		return run, err
	}
	if cerr != nil {
		return run, cerr
	}
	_, run.Hits = tb.Injector.Table().Entries()
	run.Requester, run.Responder = tb.Req.Counters(), tb.Resp.Counters()
	run.Trace, run.IntegrityErr = tb.Merge(ctx, c, merged)
	if run.IntegrityErr != nil && !errors.Is(run.IntegrityErr, trace.ErrInvalidTest) {
		return run, run.IntegrityErr
	}
	// Corrupted WRITE data fails at the responder, corrupted READ
	// responses at the requester.
	icrc := tb.Req.Counter(soft.CntRxICRCEncapsulated) + tb.Resp.Counter(soft.CntRxICRCEncapsulated) - icrcBefore
	v := Verify{Mode: tb.Cfg.IterMode, Geometry: g, Options: intent.Options{SendConns: p.SendQPs}}
	if run.Traffic != nil {
		v.Conns = run.Traffic.Conns()
	}
	run.Events, err = checkEvents(merged, run.Entries, intents, v, int64(icrc))
	return run, err
}

// settle waits until the switch has received every packet the RNICs
// sent and the RNICs every packet the switch sent them, the dumpers have received every copy the injector mirrored and
// the traffic has gone quiet, at most five seconds. The RNICs' own count
// matters on a loaded machine: their timers run while the injector
// waits for a core, so a requester can give up (retry exceeded) with
// its last retransmissions still queued in front of the switch, and a
// quiet injector then only means a starved one.
func (tb *Testbed) settle(ctx context.Context) {
	if tb.Cfg.Virtual {
		tb.drain()
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	var last uint64
	for stable := 0; stable < 5 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(10 * time.Millisecond)
		sent := tb.Req.Counter(soft.CntTxPackets) + tb.Resp.Counter(soft.CntTxPackets)
		st := tb.Injector.Stats()
		var got, rx uint64
		for _, ps := range st.Ports {
			switch ps.Role {
			case "mirror":
				got += ps.TxDropped // copies a full dumper queue refused
			case "traffic":
				rx += ps.RxPackets
			}
		}
		for _, d := range tb.Dumpers {
			s := d.Status()
			got += s.Captured + s.ArenaFull + s.PortDropped
		}
		// What the switch sent the RNICs, they have read: a request
		// still queued for a starved responder has its answer to come.
		read := true
		for _, l := range tb.hostLinks {
			a, b := l.a.Stats(), l.b.Stats()
			read = read && a.RxPackets+a.Dropped >= b.TxPackets
		}
		if read && rx >= sent && got >= st.Mirrored && st.Mirrored == last {
			stable++
		} else {
			stable = 0
		}
		last = st.Mirrored
	}
}

// IntentCheck is what the trace says about one data-pkt-events entry.
type IntentCheck struct {
	Intent intent.Intent `json:"intent"`
	// Fired counts the packets that carried the intent's event at one of
	// its (connection, PSN, ITER) positions, the rounds replayed from the
	// trace; Entries is how many entries the injector loaded for it (one:
	// a packet, or every packet for psn: all).
	Fired   int `json:"fired"`
	Entries int `json:"entries"`
	// Problem says why the intent does not count as done ("" when it
	// fired as asked).
	Problem string `json:"problem,omitempty"`
}

// Verify is what checkEvents needs to know to replay the injector's ITER
// registers from the trace: the rule it counted rounds with and the
// connections' metadata (each data direction starts in round 1 at its
// initial PSN, as Table.Load sets it).
type Verify struct {
	Mode     intent.IterMode
	Conns    []intent.Conn
	Geometry intent.Geometry
	Options  intent.Options
}

// replayConn is one data direction's ITER registers, replayed.
type replayConn struct {
	last uint32
	iter uint16
}

type connID struct {
	src, dst [16]byte
	qpn      uint32
}

// checkEvents reads the merged trace and checks it against the intents,
// trusting nothing the injector says about itself: its per-entry hit
// counters are not read. The trace holds every RoCE packet the switch
// received, mirrored at ingress in the order it saw them, so replaying
// the ITER rule over it gives each data packet's round exactly as the
// injector computed it. Each entry must then appear at its (QP, PSN,
// ITER) with its event mark, once; a mark anywhere else, a position that
// passed unmarked, or an intent with no position that fired is a problem.
// An intent that cannot fire (iter 9 of a connection that never
// retransmits eight times) is thus reported instead of passing silently.
// Dropped and corrupted packets must be sent again, ECN marks must draw
// CNPs and every corruption must fail the receiver's ICRC check
// (icrcDrops < 0: the receiver's counter is unknown, not checked).
func checkEvents(merged string, entries []intent.Entry, intents []intent.Intent, v Verify, icrcDrops int64) (EventCheck, error) {
	ec := EventCheck{Marked: map[string]int{}}
	if icrcDrops > 0 {
		ec.ICRCDrops = uint64(icrcDrops)
	}
	r, err := pcap.Open(merged)
	if err != nil {
		return ec, err
	}
	defer r.Close()
	type pkey struct {
		qpn, psn uint32
		ev       mirror.EventType
	}
	// The registers of every connection direction that carries data, as
	// Table.Load starts them.
	conns := map[connID]*replayConn{}
	for i, c := range v.Conns {
		src, dst, qpn := intent.DataDirection(i, c, v.Geometry, v.Options)
		st := &replayConn{iter: 1, last: (c.RequesterIPSN - 1) & roce.PSNMask}
		if v.Mode == intent.IterP4 {
			st.last = c.RequesterIPSN & roce.PSNMask
		}
		conns[connID{src, dst, qpn}] = st
	}
	type pos struct {
		c    connID
		psn  uint32
		iter uint16
	}
	byPos := map[pos]int{}
	for i, e := range entries {
		byPos[pos{connID{e.Key.Src, e.Key.Dst, e.Key.DstQPN}, e.Key.PSN, e.Key.Iter}] = i
	}
	fired := make([]int, len(entries))
	seen := map[[2]uint32]int{} // data packets by (dst QPN, PSN)
	var hitPkts []pkey
	var rec pcap.Record
	var p roce.Packet
	var np header.Parsed
	for {
		if err := r.Next(&rec); err == io.EOF {
			break
		} else if err != nil {
			return ec, err
		}
		ec.Packets++
		if err := roce.ParseTruncated(rec.Data, roce.UDPPort, &p); err != nil {
			ec.Problems = append(ec.Problems, fmt.Sprintf("record %d: %v", ec.Packets, err))
			continue
		}
		np = p.Net
		m, err := mirror.Read(rec.Data, &np)
		if err != nil {
			continue
		}
		if p.IsCNP() {
			ec.CNPs++
			continue
		}
		info := p.Info()
		if info.Payload {
			seen[[2]uint32{p.DestQP, p.PSN}]++
		}
		// The round this packet was in when the injector matched it.
		id := connID{p.SrcGID(rec.Data), p.DstGID(rec.Data), p.DestQP}
		entry := -1
		var iter uint16
		if st := conns[id]; st != nil && info.Payload && (info.Transport == roce.TransportRC || info.Transport == roce.TransportUC) {
			switch v.Mode {
			case intent.IterPaper:
				if roce.ComparePSN(p.PSN, st.last) <= 0 {
					st.iter++
				}
				st.last = p.PSN
			case intent.IterP4:
				if p.PSN != st.last {
					st.iter++
				} else if info.Position.IsStart() {
					st.iter = 1
				}
				st.last = (p.PSN + 1) & roce.PSNMask
			}
			iter = st.iter
			if i, ok := byPos[pos{id, p.PSN, iter}]; ok {
				entry = i
			} else if i, ok := byPos[pos{id, intent.AnyPSN, iter}]; ok {
				entry = i
			}
		}
		if m.Event != mirror.EventNone {
			ec.Marked[m.Event.String()]++
			hitPkts = append(hitPkts, pkey{p.DestQP, p.PSN, m.Event})
		}
		switch {
		case entry >= 0 && m.Event == entries[entry].Event:
			fired[entry]++
		case entry >= 0:
			ec.Problems = append(ec.Problems, fmt.Sprintf("qpn %#x psn %d iter %d is where %v asked for %v, the packet carries %v",
				p.DestQP, p.PSN, iter, intents[entries[entry].Intent], entries[entry].Event, m.Event))
		case m.Event != mirror.EventNone:
			ec.Problems = append(ec.Problems, fmt.Sprintf("qpn %#x psn %d (round %d) carries %v, which no intent asked for", p.DestQP, p.PSN, iter, m.Event))
		}
	}
	ec.Intents = make([]IntentCheck, len(intents))
	for i, in := range intents {
		ec.Intents[i].Intent = in
	}
	for i, e := range entries {
		if e.Intent < 0 || e.Intent >= len(ec.Intents) {
			continue
		}
		ic := &ec.Intents[e.Intent]
		ic.Entries++
		ic.Fired += fired[i]
		if fired[i] > 1 && e.Key.PSN != intent.AnyPSN {
			ic.Problem = fmt.Sprintf("fired %d times at psn %d iter %d, once was asked", fired[i], e.Key.PSN, e.Key.Iter)
		}
	}
	for i := range ec.Intents {
		ic := &ec.Intents[i]
		if ic.Fired == 0 && ic.Problem == "" {
			ic.Problem = fmt.Sprintf("never fired: no packet of the trace was at its position in round %d", ic.Intent.Iter)
			if ic.Entries == 0 {
				ic.Problem = "never fired: it has no entry (was it loaded?)"
			}
		}
		if ic.Problem != "" {
			ec.Problems = append(ec.Problems, fmt.Sprintf("intent %d %v %s", i, ic.Intent, ic.Problem))
		}
	}
	for _, h := range hitPkts {
		if h.ev == mirror.EventECN {
			continue
		}
		if seen[[2]uint32{h.qpn, h.psn}] >= 2 {
			ec.Retransmitted++
		} else {
			ec.Problems = append(ec.Problems, fmt.Sprintf("qpn %#x psn %d (%v) was not sent again", h.qpn, h.psn, h.ev))
		}
	}
	if ec.Marked[mirror.EventECN.String()] > 0 && ec.CNPs == 0 {
		ec.Problems = append(ec.Problems, "ECN-marked packets drew no CNP")
	}
	if n := int64(ec.Marked[mirror.EventBitError.String()]); icrcDrops >= 0 && n != icrcDrops {
		ec.Problems = append(ec.Problems, fmt.Sprintf("%d corrupted packets, the receiver dropped %d for a bad ICRC", n, icrcDrops))
	}
	return ec, nil
}

// NotFired lists the intents the trace shows never fired.
func (ec *EventCheck) NotFired() []intent.Intent {
	var out []intent.Intent
	for _, ic := range ec.Intents {
		if ic.Fired == 0 {
			out = append(out, ic.Intent)
		}
	}
	return out
}

// Pass says whether the run's traffic completed, its trace passed the
// integrity check and the events are as intended.
func (r *EventRun) Pass() bool {
	return r.Traffic != nil && r.Traffic.OK() && r.IntegrityErr == nil && len(r.Events.Problems) == 0
}
