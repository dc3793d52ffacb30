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
	run.Events, err = checkEvents(merged, run.Entries, run.Hits, icrc)
	return run, err
}

// settle waits until the dumpers have received every copy the injector
// mirrored and the traffic has gone quiet, at most two seconds.
func (tb *Testbed) settle(ctx context.Context) {
	deadline := time.Now().Add(2 * time.Second)
	var last uint64
	for stable := 0; stable < 5 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(10 * time.Millisecond)
		st := tb.Injector.Stats()
		var got uint64
		for _, ps := range st.Ports {
			if ps.Role == "mirror" {
				got += ps.TxDropped // copies a full dumper queue refused
			}
		}
		for _, d := range tb.Dumpers {
			s := d.Status()
			got += s.Captured + s.ArenaFull + s.PortDropped
		}
		if got >= st.Mirrored && st.Mirrored == last {
			stable++
		} else {
			stable = 0
		}
		last = st.Mirrored
	}
}

// checkEvents reads the merged trace and checks it against the entries:
// every packet an entry hit carries the entry's event and no other packet
// carries one; dropped and corrupted packets are sent again; ECN marks
// draw CNPs; every corruption failed the receiver's ICRC check.
func checkEvents(merged string, entries []intent.Entry, hits []uint64, icrcDrops uint64) (EventCheck, error) {
	ec := EventCheck{Marked: map[string]int{}, ICRCDrops: icrcDrops}
	r, err := pcap.Open(merged)
	if err != nil {
		return ec, err
	}
	defer r.Close()
	type pkey struct {
		qpn, psn uint32
		ev       mirror.EventType
	}
	want := map[intent.Key]mirror.EventType{}
	for i, e := range entries {
		if i < len(hits) && hits[i] > 0 {
			want[e.Key] = e.Event
		}
	}
	seen := map[[2]uint32]int{} // data packets by (dst QPN, PSN)
	var hitPkts []pkey
	var rec pcap.Record
	var p roce.Packet
	var np header.Parsed
	expect := map[mirror.EventType]int{}
	for i, e := range entries {
		if i < len(hits) {
			expect[e.Event] += int(hits[i])
		}
	}
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
		if p.Info().Payload {
			seen[[2]uint32{p.DestQP, p.PSN}]++
		}
		if m.Event == mirror.EventNone {
			continue
		}
		ec.Marked[m.Event.String()]++
		hitPkts = append(hitPkts, pkey{p.DestQP, p.PSN, m.Event})
		k := intent.Key{Src: p.SrcGID(rec.Data), Dst: p.DstGID(rec.Data), DstQPN: p.DestQP, PSN: p.PSN}
		ok := false
		for key, ev := range want {
			if key.Src == k.Src && key.Dst == k.Dst && key.DstQPN == k.DstQPN && (key.PSN == k.PSN || key.PSN == intent.AnyPSN) && ev == m.Event {
				ok = true
				break
			}
		}
		if !ok {
			ec.Problems = append(ec.Problems, fmt.Sprintf("qpn %#x psn %d carries %v, which no hit entry asked for", p.DestQP, p.PSN, m.Event))
		}
	}
	for ev, n := range expect {
		if ec.Marked[ev.String()] != n {
			ec.Problems = append(ec.Problems, fmt.Sprintf("%d packets carry %v, the entries were hit %d times", ec.Marked[ev.String()], ev, n))
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
	if n := uint64(ec.Marked[mirror.EventBitError.String()]); n != icrcDrops {
		ec.Problems = append(ec.Problems, fmt.Sprintf("%d corrupted packets, the receiver dropped %d for a bad ICRC", n, icrcDrops))
	}
	return ec, nil
}

// Pass says whether the run's traffic completed, its trace passed the
// integrity check and the events are as intended.
func (r *EventRun) Pass() bool {
	return r.Traffic != nil && r.Traffic.OK() && r.IntegrityErr == nil && len(r.Events.Problems) == 0
}
