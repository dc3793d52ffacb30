package lumina

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// Runner runs a Lumina test num-repeats times and keeps every result in
// result-path/<timestamp>/<repeat>/.
type Runner struct {
	Test *Test
	// Lab maps the test's hosts, switch and dumpers to the in-process
	// testbed; otherwise Remote drives the machines the file names.
	Lab    bool
	Remote *Remote
	// IterMode is the injector's ITER rule (the file has no key for it).
	IterMode intent.IterMode
	// Progress receives a line per step; nil for none.
	Progress io.Writer
	// Analyze, when set, runs the analyzers over a finished repeat's
	// directory and returns a one-line verdict and whether the RNICs
	// behaved as expected.
	Analyze func(ctx context.Context, dir string, m *luminaanalyzer.Meta) (string, bool, error)
	// Now stamps the result directory (time.Now when nil).
	Now func() time.Time
	// Testbed, when set, adjusts the lab's testbed before it is built
	// (tests and the lab use it to give an RNIC another profile).
	Testbed func(*TestbedConfig)
	// WallClock runs the lab's testbed on goroutines and the host's
	// clock instead of virtual time (twin.go): its timings are then this
	// machine's, and two runs differ.
	WallClock bool
}

// RepeatResult is one repeat's outcome.
type RepeatResult struct {
	Repeat int    `json:"repeat"`
	Dir    string `json:"dir"`
	// Valid says whether the trace passed the integrity check and shows
	// every intent fired as asked; an invalid repeat has no analysis
	// presented as valid.
	Valid     bool   `json:"valid"`
	Integrity string `json:"integrity"`
	// Events is "ok" when the trace shows each data-pkt-events entry at
	// its (QP, PSN, ITER) with its mark, and nothing else marked;
	// otherwise the problems.
	Events     string  `json:"events"`
	Packets    uint64  `json:"packets"`
	Traffic    string  `json:"traffic"` // "ok" or the first failed message
	Goodput    float64 `json:"goodput_bps"`
	Analysis   string  `json:"analysis,omitempty"`
	AnalysisOK bool    `json:"analysis_ok"`
	Error      string  `json:"error,omitempty"`
	// LuminaDir is the repeat in Lumina's own layout
	// (result-path/<repeat>/), for lumina-analyzer.
	LuminaDir string `json:"lumina_dir,omitempty"`
}

// Summary is the whole run.
type Summary struct {
	Test    string         `json:"test"`
	Dir     string         `json:"dir"`
	Repeats []RepeatResult `json:"repeats"`
}

// ErrRemote is returned when a test is neither run in the lab nor given
// the means to reach its machines.
var ErrRemote = errors.New("lumina: no lab and no remote access: use --lab to run the test on this machine")

func (r *Runner) say(format string, a ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, format+"\n", a...)
	}
}

// Run runs every repeat. A repeat that fails to run is recorded with its
// error and the next one still runs; what was collected stays on disk.
func (r *Runner) Run(ctx context.Context) (*Summary, error) {
	if !r.Lab && (r.Remote == nil || r.Remote.Exec == nil) {
		return nil, ErrRemote
	}
	t := r.Test
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	top := filepath.Join(t.Spec.ResultPath, now().Format("20060102-150405"))
	if err := os.MkdirAll(top, 0o755); err != nil {
		return nil, fmt.Errorf("lumina: result-path: %w", err)
	}
	sum := &Summary{Test: t.Doc.File, Dir: top}
	var errs []error
	// As Lumina's orchestrator does: no iteration of an earlier run
	// stays to be read as this one's.
	if err := removeOldIters(t.Spec.ResultPath); err != nil {
		return nil, fmt.Errorf("lumina: result-path: %w", err)
	}
	if !r.Lab && r.Remote.Setup {
		r.say("lumina: setting up the machines as Lumina's orchestrator does")
		a, err := r.Remote.setup(ctx, t, r.IterMode)
		if err != nil {
			return sum, err
		}
		// Every host is left as it was, whatever the repeats did.
		defer func() {
			if err := a.Teardown(ctx, r.Remote.Exec); err != nil {
				r.say("lumina: restoring the machines: %v", err)
			}
		}()
	}
	for rep := 0; rep < t.Spec.NumRepeats; rep++ {
		if ctx.Err() != nil {
			break
		}
		dir := filepath.Join(top, fmt.Sprint(rep))
		r.say("lumina: repeat %d of %d in %s", rep+1, t.Spec.NumRepeats, dir)
		run := r.repeat
		if !r.Lab {
			run = r.runRemote
		}
		res, err := run(ctx, rep, dir)
		if err != nil {
			res.Error = err.Error()
			errs = append(errs, fmt.Errorf("repeat %d: %w", rep, err))
		}
		sum.Repeats = append(sum.Repeats, res)
		r.say("lumina: repeat %d: %s", rep, res.line())
	}
	if b, err := json.MarshalIndent(sum, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(top, "summary.json"), append(b, '\n'), 0o644)
	}
	return sum, errors.Join(append(errs, ctx.Err())...)
}

func (res RepeatResult) line() string {
	if res.Error != "" && res.Packets == 0 {
		return "error: " + res.Error
	}
	s := fmt.Sprintf("%d packets, integrity %s, events %s, traffic %s", res.Packets, res.Integrity, res.Events, res.Traffic)
	if res.Analysis != "" {
		s += ", " + res.Analysis
	}
	return s
}

// profile turns a host's nic.type and roce-parameters into a soft RNIC
// profile.
func profile(h HostSpec) soft.Profile {
	name := strings.ToLower(h.NIC.Type)
	p, err := soft.ProfileByName(name)
	if err != nil {
		p = soft.ProfileCX5
		p.Name = name
	}
	rp := h.RoCEParameters
	p.CNPEnable, p.DCQCNRate = rp.DCQCNNPEnable, rp.DCQCNRPEnable
	p.AdaptiveRetrans = rp.AdaptiveRetrans
	if name == "e810" {
		// The E810 (irdma) has one switch for both ends of DCQCN and
		// none of mlx5's CNP knobs: Lumina's host code sets only
		// dcqcn-enable there, and its checks take an E810 as pacing no
		// CNPs and sending none with a NAK, which is the preset; the
		// file's min-time-between-cnps and slow-restart do not apply.
		if rp.DCQCNEnable != nil {
			p.CNPEnable, p.DCQCNRate = *rp.DCQCNEnable, *rp.DCQCNEnable
		}
		return p
	}
	p.MinTimeBetweenCNPs = time.Duration(rp.MinTimeBetweenCNPs) * time.Microsecond
	// Slow restart is mlx5's lossy-RoCE extension of DCQCN (the
	// ROCE_ACCL register's roce_slow_restart_en): the notification point
	// answers an out-of-order packet with a CNP beside the NAK, so the
	// sender retransmits at a lowered rate (Lumina §3.3, "Recent Mellanox
	// RNICs extend DCQCN to lossy networks"). With it off, a NAK goes
	// alone. The CX4 preset never sends the CNP.
	p.NAKTriggersCNP = p.NAKTriggersCNP && rp.SlowRestart
	return p
}

// addrs splits a NIC's GIDs (the address part of each ip-list entry; the
// prefix only matters when the address is assigned to a real NIC) into
// the first and the rest.
func addrs(n NICSpec) (netip.Addr, []netip.Addr) {
	out := n.Addrs()
	if len(out) == 0 {
		return netip.Addr{}, nil
	}
	return out[0], out[1:]
}

// repeat runs one repeat on a fresh testbed.
func (r *Runner) repeat(ctx context.Context, rep int, dir string) (RepeatResult, error) {
	t := r.Test
	s := &t.Spec
	res := RepeatResult{Repeat: rep, Dir: dir, Traffic: "not run", Integrity: "not checked", Events: "not checked"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	reqIP, reqExtra := addrs(s.Requester.NIC)
	respIP, respExtra := addrs(s.Responder.NIC)
	cfg := TestbedConfig{Name: fmt.Sprintf("lumina%d-%d", os.Getpid(), rep), Dir: filepath.Join(dir, "dumps"),
		RequesterIP: reqIP, RequesterExtra: reqExtra, ResponderIP: respIP, ResponderExtra: respExtra,
		Requester: profile(s.Requester), Responder: profile(s.Responder), IterMode: r.IterMode,
		RewritePort: uint16(s.RewriteUDPDstPort), Virtual: !r.WallClock,
		Dumpers: []DumperSpec{
			{Name: "requester-mirror", File: s.RequesterMirror.PktDumpConf.DumpFilename,
				SnapLen: s.RequesterMirror.PktDumpConf.SnapLen, NumPkts: s.RequesterMirror.PktDumpConf.NumPkts},
			{Name: "responder-mirror", File: s.ResponderMirror.PktDumpConf.DumpFilename,
				SnapLen: s.ResponderMirror.PktDumpConf.SnapLen, NumPkts: s.ResponderMirror.PktDumpConf.NumPkts},
		}}
	if s.Switch.PortSpeed != "" {
		// Validated when the file was loaded.
		cfg.SpeedMbps, _ = ParsePortSpeed(s.Switch.PortSpeed)
	}
	if r.Testbed != nil {
		r.Testbed(&cfg)
	}
	tb, err := NewTestbed(cfg)
	if err != nil {
		return res, err
	}
	defer tb.Close()
	reqBefore, respBefore := tb.Req.Counters(), tb.Resp.Counters()
	tr := &s.Traffic
	p := trafficgen.Params{Verb: t.Verb, NumQPs: t.NumQPs, SendQPs: t.SendQPs, MsgsPerQP: tr.NumMsgsPerQP,
		MessageSize: tr.MessageSize, MTU: tr.MTU, TxDepth: tr.TxDepth, Timeout: uint8(tr.MinRetransmitTimeout),
		RetryCnt: uint8(tr.MaxRetransmitRetry), NoRetry: tr.MaxRetransmitRetry == 0, BarrierSync: tr.BarrierSync,
		Seed: uint64(rep + 1)}
	merged := filepath.Join(dir, s.AggregatePcapFilename)
	run, err := tb.Run(ctx, RunOptions{Params: p, Intents: t.Intents, Merged: merged, MultiGID: tr.MultiGID})
	if run != nil {
		reqAfter, respAfter := tb.Req.Counters(), tb.Resp.Counters()
		r.record(&res, run)
		if werr := r.writeRun(dir, run); werr != nil && err == nil {
			err = werr
		}
		if werr := r.writeMeta(dir, rep, run, diff(reqAfter, reqBefore), diff(respAfter, respBefore)); werr != nil && err == nil {
			err = werr
		}
		rq, rs := s.Requester.NIC.Type, s.Responder.NIC.Type
		c := [4]HostCounters{SoftHostCounters(rq, reqBefore), SoftHostCounters(rq, reqAfter),
			SoftHostCounters(rs, respBefore), SoftHostCounters(rs, respAfter)}
		if werr := r.writeLumina(&res, merged, run, &c[0], &c[1], &c[2], &c[3]); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return res, err
	}
	return res, r.analyze(ctx, dir, &res)
}

// analyze runs the Analyze hook on a finished repeat.
func (r *Runner) analyze(ctx context.Context, dir string, res *RepeatResult) error {
	if r.Analyze == nil {
		return nil
	}
	m, err := luminaanalyzer.ReadMeta(dir)
	if err != nil {
		return err
	}
	verdict, ok, err := r.Analyze(ctx, dir, m)
	res.Analysis, res.AnalysisOK = verdict, ok && res.Valid
	if err != nil {
		return fmt.Errorf("analysis: %w", err)
	}
	return nil
}

func (r *Runner) record(res *RepeatResult, run *EventRun) {
	if run.Traffic != nil {
		res.Traffic, res.Goodput = "ok", run.Traffic.Goodput
		for _, q := range run.Traffic.QPs {
			if q.Status != "ok" {
				res.Traffic = q.Status
				break
			}
		}
	}
	if run.Trace != nil {
		res.Packets = run.Trace.Packets
	}
	res.Integrity = "ok"
	if run.IntegrityErr != nil {
		res.Integrity = "INVALID: " + run.IntegrityErr.Error()
	}
	// The intents are checked against the trace, not the injector's
	// word: a test whose events did not happen as asked did not test
	// what it says, however clean its trace.
	res.Events = "ok"
	if len(run.Events.Problems) > 0 {
		res.Events = "INVALID: " + strings.Join(run.Events.Problems, "; ")
	}
	res.Valid = run.IntegrityErr == nil && run.Trace != nil && len(run.Events.Problems) == 0
}

func diff(after, before map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(after))
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// writeMeta writes the repeat's meta.json; the counters are the RNICs'
// differences over the run (nil when unknown).
func (r *Runner) writeMeta(dir string, rep int, run *EventRun, reqCnt, respCnt map[string]uint64) error {
	t := r.Test
	s := &t.Spec
	m := &luminaanalyzer.Meta{Test: t.Doc.File, Repeat: rep, Trace: s.AggregatePcapFilename, Geometry: t.Geometry,
		TxDepth: s.Traffic.TxDepth, Timeout: uint8(s.Traffic.MinRetransmitTimeout), RetryCnt: uint8(s.Traffic.MaxRetransmitRetry),
		Intents: t.Intents, Entries: run.Entries, Hits: run.Hits, Requester: reqCnt, Responder: respCnt,
		RequesterNIC: nicConfig(s.Requester), ResponderNIC: nicConfig(s.Responder),
		Valid: run.IntegrityErr == nil && run.Trace != nil}
	if run.Capture != nil {
		m.Injector = run.Capture.Injector
	}
	if run.IntegrityErr != nil {
		m.IntegrityNote = run.IntegrityErr.Error()
	}
	if run.Traffic != nil {
		m.Conns = run.Traffic.Conns()
		for _, q := range run.Traffic.QPs {
			mct := make([]int64, len(q.MCT))
			for i, d := range q.MCT {
				mct[i] = int64(d)
			}
			m.MCT = append(m.MCT, mct)
		}
	}
	return luminaanalyzer.WriteMeta(dir, m)
}

// writeRun writes the traffic generator's, the integrity check's, the
// event check's and the dumpers' results beside the trace.
func (r *Runner) writeRun(dir string, run *EventRun) error {
	var errs []error
	write := func(name string, v any) {
		b, err := json.MarshalIndent(v, "", "  ")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644)
		}
		errs = append(errs, err)
	}
	if run.Traffic != nil {
		write("trafficgen.json", run.Traffic)
	}
	if run.Trace != nil {
		write(luminaanalyzer.IntegrityFile, run.Trace)
	}
	if run.Capture != nil {
		write("dumpers.json", run.Capture.Results)
	}
	// What the trace says of each intent, beside the trace.
	write("events.json", run.Events)
	return errors.Join(errs...)
}

// writeLumina writes the repeat in Lumina's layout (result-path/<repeat>/)
// from what the run collected; counters a host did not give are nil.
func (r *Runner) writeLumina(res *RepeatResult, merged string, run *EventRun, reqStart, reqFinish, respStart, respFinish *HostCounters) error {
	t := r.Test
	s := &t.Spec
	ports := portsOf(s)
	it := &LuminaIter{Dir: filepath.Join(s.ResultPath, fmt.Sprint(res.Repeat)), TestName: filepath.Base(t.Doc.File),
		TestFile: t.Raw, AggregateName: s.AggregatePcapFilename, Messages: []QPInfo{},
		ReqStart: reqStart, ReqFinish: reqFinish, RespStart: respStart, RespFinish: respFinish}
	if _, err := os.Stat(merged); err == nil {
		it.Merged = merged
	}
	if run.Traffic != nil {
		it.Messages = MessageSnapshot(run.Traffic.Conns(), t.Verb, t.SendQPs, ports.req, ports.resp)
	}
	if run.Capture != nil {
		it.State = stateSnapshot(run.Capture.Injector, ports, run.Entries, run.Hits)
		for _, src := range run.Capture.Sources {
			md := MirrorDump{Paths: src.Paths}
			switch src.Name {
			case "requester-mirror":
				md.DumpFilename = s.RequesterMirror.PktDumpConf.DumpFilename
			case "responder-mirror":
				md.DumpFilename = s.ResponderMirror.PktDumpConf.DumpFilename
			}
			it.Dumps = append(it.Dumps, md)
		}
	} else {
		it.State = stateSnapshot(mirror.InjectorStats{}, ports, run.Entries, run.Hits)
	}
	if err := WriteLuminaIter(it); err != nil {
		return fmt.Errorf("lumina layout: %w", err)
	}
	res.LuminaDir = it.Dir
	return nil
}

func nicConfig(h HostSpec) luminaanalyzer.NICConfig {
	rp := h.RoCEParameters
	c := luminaanalyzer.NICConfig{Type: h.NIC.Type, DCQCNRPEnable: rp.DCQCNRPEnable, DCQCNNPEnable: rp.DCQCNNPEnable,
		MinTimeBetweenCNPs: int64(rp.MinTimeBetweenCNPs) * 1000, AdaptiveRetrans: rp.AdaptiveRetrans, SlowRestart: rp.SlowRestart}
	if rp.DCQCNEnable != nil {
		// The E810's one switch is both ends.
		c.DCQCNRPEnable, c.DCQCNNPEnable = *rp.DCQCNEnable, *rp.DCQCNEnable
	}
	if strings.EqualFold(h.NIC.Type, "E810") {
		// mlx5's CNP interval and slow restart do not reach an E810
		// (profile): the analyzers must not expect them.
		c.MinTimeBetweenCNPs, c.SlowRestart = 0, false
	}
	return c
}
