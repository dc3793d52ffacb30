package dtatofino

import (
	"bytes"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

// flowVerdict is what translator.p4's flow control (-DDTA_METER) does
// with a report that reaches the meter.
type flowVerdict int

const (
	flowTranslate flowVerdict = iota // green: translated as without the meter
	flowToCPU                        // red, high priority: to the CPU's queue
	flowDropped                      // red, low priority: dropped, counted
)

func (v flowVerdict) String() string {
	return [...]string{"translate", "to CPU", "dropped"}[v]
}

// pipeMeter is a model of translator.p4's flow control in the build with
// -DDTA_METER, from the entries the script installs: report_priority (a
// report from the CPU's port is high priority and resent, one with a DSCP
// it lists is high, any other low), flow_cfg (the meter on, the CPU's
// port and queue)
// and rdma_meter (per collector, a two-rate meter with equal rates and
// bursts, that is one token bucket of burst reports filling at rate a
// second, full at the start; a red report takes no token).
type pipeMeter struct {
	cpuPort, cpuQid int
	high            [64]bool
	rate, burst     map[int]float64
	tokens          map[int]float64
	last            map[int]int64
}

var (
	setFlowRE     = regexp.MustCompile(`Ingress\.flow_cfg\.set_default_with_set_flow\(metered=1, cpu_port=(\d+), cpu_qid=(\d+)\)`)
	setPriorityRE = regexp.MustCompile(`Ingress\.report_priority\.add_with_set_priority\(ingress_port=(\d+), ingress_port_mask=(0x[0-9a-f]+), ` +
		`dscp=(\d+), dscp_mask=(0x[0-9a-f]+), MATCH_PRIORITY=(\d+), high=(\d), resent=(\d)\)`)
	meterModRE = regexp.MustCompile(`Ingress\.rdma_meter\.mod\(METER_INDEX=(\d+), METER_SPEC_CIR_PPS=(\d+), METER_SPEC_PIR_PPS=(\d+), ` +
		`METER_SPEC_CBS_PKTS=(\d+), METER_SPEC_PBS_PKTS=(\d+)\)`)
)

func newPipeMeter(t *testing.T, script string) *pipeMeter {
	t.Helper()
	num := func(s string) int {
		v, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			t.Fatalf("script: %q: %v", s, err)
		}
		return int(v)
	}
	m := &pipeMeter{rate: map[int]float64{}, burst: map[int]float64{}, tokens: map[int]float64{}, last: map[int]int64{}}
	c := setFlowRE.FindStringSubmatch(script)
	if c == nil {
		t.Fatal("the script does not turn the meter on")
	}
	m.cpuPort, m.cpuQid = num(c[1]), num(c[2])
	cpuEntry := false
	for _, l := range setPriorityRE.FindAllStringSubmatch(script, -1) {
		port, portMask, dscp, dscpMask, prio, high, resent := num(l[1]), num(l[2]), num(l[3]), num(l[4]), num(l[5]), num(l[6]), num(l[7])
		switch {
		case portMask == 0x1ff && dscpMask == 0 && prio == 0 && high == 1 && resent == 1:
			if port != m.cpuPort {
				t.Fatalf("script: the resends' entry is for port %d, the CPU's is %d", port, m.cpuPort)
			}
			cpuEntry = true
		case portMask == 0 && dscpMask == 0x3f && prio > 0 && high == 1 && resent == 0:
			m.high[dscp] = true
		default:
			t.Fatalf("script: a report_priority entry the model does not know: %s", l[0])
		}
	}
	if !cpuEntry {
		t.Fatal("the script gives the CPU's resends no report_priority entry")
	}
	for _, l := range meterModRE.FindAllStringSubmatch(script, -1) {
		i, cir, pir, cbs, pbs := num(l[1]), num(l[2]), num(l[3]), num(l[4]), num(l[5])
		if cir != pir || cbs != pbs {
			t.Fatalf("script: meter %d has two rates or bursts (%s): the model's is one bucket", i, l[0])
		}
		m.rate[i], m.burst[i] = float64(cir), float64(cbs)
	}
	if len(m.rate) == 0 {
		t.Fatal("the script sets no meter")
	}
	return m
}

// meteredModel is the metered translator and the model of its flow
// control from its script.
func meteredModel(t *testing.T) (Translator, *pipeMeter) {
	tr := metered(t)
	script, err := tr.Script()
	if err != nil {
		t.Fatal(err)
	}
	return tr, newPipeMeter(t, script)
}

// decide is the flow control's verdict on a parsed report for collector
// coll with DSCP dscp that came in on port in at time now (ns), and
// whether the report is a resend from the CPU (which the sequence check
// then skips).
func (m *pipeMeter) decide(t *testing.T, coll int, dscp uint8, in int, now int64) (v flowVerdict, resent bool) {
	high := m.high[dscp&63]
	if in == m.cpuPort {
		high, resent = true, true
	}
	rate, ok := m.rate[coll]
	if !ok {
		t.Fatalf("no meter for collector %d", coll)
	}
	if _, started := m.last[coll]; !started {
		m.tokens[coll], m.last[coll] = m.burst[coll], now
	}
	m.tokens[coll] = min(m.burst[coll], m.tokens[coll]+float64(now-m.last[coll])*rate/1e9)
	m.last[coll] = now
	switch {
	case m.tokens[coll] >= 1:
		m.tokens[coll]--
		return flowTranslate, resent
	case high:
		return flowToCPU, resent
	}
	return flowDropped, resent
}

// TestMeterDecision: green and red, high and low priority, through the
// model of the script's entries: within the burst every report is
// translated; beyond it a low-priority report is dropped and a
// high-priority one goes to the CPU's port and queue, and so does the
// CPU's resend of it (high whatever its DSCP) while the meter is red;
// each collector has its own meter; a token returns at the rate.
func TestMeterDecision(t *testing.T) {
	tr, m := meteredModel(t)
	f := tr.FlowControl
	if m.cpuPort != f.CPUPort || m.cpuQid != f.CPUQueue {
		t.Fatalf("the CPU's queue is port %d queue %d, want %d and %d", m.cpuPort, m.cpuQid, f.CPUPort, f.CPUQueue)
	}
	const in = 8 // the fabric port
	now := int64(5e9)
	step := func(what string, coll int, dscp uint8, port int, want flowVerdict, wantResent bool) {
		t.Helper()
		v, resent := m.decide(t, coll, dscp, port, now)
		if v != want || resent != wantResent {
			t.Errorf("%s: %v (resent %v), want %v (resent %v)", what, v, resent, want, wantResent)
		}
	}
	for i := range int(f.Burst) {
		step("green low "+strconv.Itoa(i), 0, 0, in, flowTranslate, false)
	}
	step("red low", 0, 0, in, flowDropped, false)
	step("red low, DSCP just below high-dscp", 0, uint8(f.HighDSCP-1), in, flowDropped, false)
	step("red high", 0, uint8(f.HighDSCP), in, flowToCPU, false)
	step("red high, EF", 0, 46, in, flowToCPU, false)
	step("the CPU's resend, red", 0, 0, f.CPUPort, flowToCPU, true)
	step("another collector's meter, green", 1, 0, in, flowTranslate, false)
	now += 1e6 // one token at 1000 a second
	step("the CPU's resend, green again", 0, 0, f.CPUPort, flowTranslate, true)
	step("red low after the token went", 0, 0, in, flowDropped, false)
	now += 1e6
	step("green high", 0, 63, in, flowTranslate, false)
	now += 1e9 // the bucket holds burst tokens at most
	for i := range int(f.Burst) {
		step("green after a pause "+strconv.Itoa(i), 0, 0, in, flowTranslate, false)
	}
	step("red after the burst", 0, 0, in, flowDropped, false)
}

// TestMeterSource holds translator.p4's flow control to pipeMeter and to
// the software translator's order of decisions: a per-collector packet
// meter on every parsed report; the CPU's resends skip the sequence
// check; a red low-priority report does not move its reporter's expected
// number on (the software translator's Unaccept) and is not ACKed; over
// the meter, high priority goes to the CPU's port and queue untranslated,
// low priority is dropped, both counted by reason.
func TestMeterSource(t *testing.T) {
	src, err := os.ReadFile(translatorP4)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		`Meter<coll_idx_t>\(COLLECTOR_SLOTS, MeterType_t\.PACKETS\) rdma_meter;`,
		`if \(md\.malformed == 0 && md\.metered == 1\) \{\s*md\.color = rdma_meter\.execute\(md\.collector\);\s*\}`,
		`action set_priority\(bit<1> high, bit<1> resent\) \{\s*md\.high = high;\s*md\.resent = resent;\s*\}`,
		`action set_flow\(bit<1> metered, PortId_t cpu_port, QueueId_t cpu_qid\) \{\s*md\.metered = metered;\s*` +
			`md\.cpu_port = cpu_port;\s*md\.cpu_qid = cpu_qid;\s*\}`,
		`default_action = set_flow\(0, 0, 0\);`,
		`if \(hdr\.dta\.retransmittable == 1 && md\.malformed == 0 && NOT_RESENT\) \{`,
		`#define NOT_RESENT \(md\.resent == 0\)`,
		`\(expected_seq\) seq_peek = \{\s*void apply\(inout bit<8> value, out bit<8> rv\) \{\s*rv = value;\s*\}\s*\};`,
		`if \(md\.color != 0 && md\.high == 0\) \{\s*md\.expected = seq_peek\.execute\(md\.reporter\);\s*\} else \{\s*` +
			`md\.expected = seq_check\.execute\(md\.reporter\);\s*\}`,
		`if \(md\.ack_session != 0 && hdr\.dta\.seqnum\[3:0\] == 15 && \(md\.color == 0 \|\| md\.high == 1\)\) \{`,
		`\} else if \(md\.color != 0\) \{\s*(?s:/\*.*?\*/)\s*if \(md\.high == 1\) \{\s*hdr\.bridge\.pkt_type = PKT_FORWARD;\s*` +
			`ig_tm_md\.ucast_egress_port = md\.cpu_port;\s*ig_tm_md\.qid = md\.cpu_qid;\s*md\.reason = DROP_TO_CPU;\s*` +
			`\} else \{\s*md\.reason = DROP_METERED;\s*discard\(\);\s*\}\s*drop_reports\.count\(md\.reason\);`,
		`const bit<3> DROP_METERED   = 4;`,
		`const bit<3> DROP_TO_CPU    = 5;`,
		// A congestion notice is an ACK with dtawire's congested bit.
		`hdr\.ack\.reserved = hdr\.ack_mirror\.flags\[6:0\];`,
		`md\.ack_mirror\.seqnum = 0;\s*md\.ack_mirror\.flags = \(bit<8>\)ACK_CONGESTED;`,
	} {
		if !regexp.MustCompile(w).Match(src) {
			t.Errorf("%s's flow control is not the model's: %q", translatorP4, w)
		}
	}
	// drop_reports' reasons are the counter script's names.
	if dropReasons[4] != "metered" || dropReasons[5] != "to_cpu" {
		t.Errorf("drop reasons %v", dropReasons)
	}
	// The notice's bit is the software translator's.
	var b [dtawire.AckLen]byte
	dtawire.Ack{Congested: true}.Encode(b[:])
	if got := p4test.Parse(t, translatorP4).Consts["ACK_CONGESTED"]; uint64(b[1]) != got {
		t.Errorf("ACK_CONGESTED %#x, dtawire's congested bit %#x", got, b[1])
	}
}

// TestMeterMatchesSoftware runs reports at twice the meter's rate at one
// collector and at its rate at the other (exponential gaps, two fifths
// high priority) through the model of
// the switch's flow control and the software translator's meter and
// priorities (Meter.Take of the report's cost, high from high-dscp): the
// same verdict for every report, and the reports both translate, the
// same RDMA packets byte for byte (the egress model against the software
// translator). The reports cost one token in both (Append, Postcarder,
// Key-Write and Key-Increment with N = 1): the switch's meter counts
// reports, the software translator's RDMA packets (TestMeterUnitDiffers).
// The software translator's queue (every report waits while one does,
// and its drain spends tokens) has no counterpart to compare here: on the
// switch the CPU's resends come back through the meter when the CPU sends
// them.
func TestMeterMatchesSoftware(t *testing.T) {
	tr := metered(t)
	tr.Collectors[0].Redundancy = 1
	tr.Collectors[0].PSN = 1
	tr.Collectors[1].PSN = 1<<24 - 63
	script, err := tr.Script()
	if err != nil {
		t.Fatal(err)
	}
	model := newPipeModel(t, script)
	meter := newPipeMeter(t, script)
	soft, conns := softTranslators(t, &tr, model.batch)
	f := tr.FlowControl
	swMeter := []*dtatranslator.Meter{
		{Rate: float64(f.Rate), Burst: float64(f.Burst)},
		{Rate: float64(f.Rate), Burst: float64(f.Burst)},
	}

	rng := rand.New(rand.NewPCG(7, 7))
	now := int64(1e9)
	// Two thirds of the reports are for the first collector: three
	// times the rate over both is twice its rate there, its rate at the
	// second.
	gap := 1e9 / float64(f.Rate) / 3
	dscps := []uint8{0, 10, 26, uint8(f.HighDSCP), 46}
	counts := map[flowVerdict]int{}
	var packets int
	for i := range 6000 {
		now += int64(rng.ExpFloat64() * gap)
		key := rng.Uint32N(1 << 20)
		var r dtawire.Report
		coll := 0
		switch w := rng.IntN(4); w {
		case 0:
			r = dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 1, Key: key, Data: be32(nil, rng.Uint32())}
		case 1:
			r = dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: 1, Key: key, Counter: rng.Uint64N(1 << 40)}
		case 2:
			lists := []struct {
				coll int
				id   uint32
			}{{0, 7}, {0, 3}, {1, 1}}
			l := lists[rng.IntN(len(lists))]
			coll = l.coll
			r = dtawire.Report{Opcode: dtawire.OpAppend, ListID: l.id, Data: be32(nil, rng.Uint32())}
		default:
			coll = 1
			r = dtawire.Report{Opcode: dtawire.OpPostcarder, Key: key % 64, Hop: uint8(rng.IntN(PostcardHops)), Data: be32(nil, rng.Uint32())}
		}
		dscp := dscps[rng.IntN(len(dscps))]
		got, _ := meter.decide(t, coll, dscp, 8, now)
		high := int(dscp) >= f.highDSCP()
		want := flowTranslate
		if !swMeter[coll].Take(dtatranslator.Cost(&r), now) {
			want = flowDropped
			if high {
				want = flowToCPU
			}
		}
		if got != want {
			t.Fatalf("report %d (%v, DSCP %d, collector %d): the switch %v, the software translator %v", i, r.Opcode, dscp, coll, got, want)
		}
		counts[got]++
		if got != flowTranslate {
			continue
		}
		sw, err := softTranslate(t, soft, conns, &tr, coll, &r)
		if err != nil {
			t.Fatalf("report %d: the software translator: %v", i, err)
		}
		hw := model.report(t, coll, &r)
		if len(sw) != len(hw) {
			t.Fatalf("report %d (%v): the software translator sent %d packets, the switch %d", i, r.Opcode, len(sw), len(hw))
		}
		for k := range sw {
			if !bytes.Equal(sw[k], hw[k]) {
				t.Fatalf("report %d (%v) packet %d differs at byte %d", i, r.Opcode, k, firstDiff(sw[k], hw[k]))
			}
			packets++
		}
	}
	if counts[flowTranslate] < 1000 || counts[flowToCPU] < 500 || counts[flowDropped] < 1000 || packets < 500 {
		t.Fatalf("verdicts %v, %d packets: the mix misses a case", counts, packets)
	}
	t.Logf("6000 reports at 2x and 1x the rates: %d translated (%d RDMA packets alike byte for byte), %d to the CPU, %d dropped, alike",
		counts[flowTranslate], packets, counts[flowToCPU], counts[flowDropped])
}

// TestMeterUnitDiffers pins down the difference in units: a Key-Write of
// N = 2 takes two tokens of the software translator's meter (two RDMA
// packets) and one of the switch's (one report), so from a full bucket
// the software translator takes burst/2 of them and the switch burst.
func TestMeterUnitDiffers(t *testing.T) {
	tr, m := meteredModel(t)
	f := tr.FlowControl
	sw := dtatranslator.Meter{Rate: float64(f.Rate), Burst: float64(f.Burst)}
	r := dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 1, Data: []byte{0, 0, 0, 1}}
	var swTaken, hwTaken int
	for range 2 * f.Burst {
		if sw.Take(dtatranslator.Cost(&r), 1e9) {
			swTaken++
		}
		if v, _ := m.decide(t, 0, 0, 8, 1e9); v == flowTranslate {
			hwTaken++
		}
	}
	if swTaken != int(f.Burst)/2 || hwTaken != int(f.Burst) {
		t.Fatalf("Key-Writes of N = 2 from a full bucket of %d: the software translator took %d, the switch %d", f.Burst, swTaken, hwTaken)
	}
}

// TestMeterUnaccept follows one reporter's retransmittable reports
// through the switch's ingress (the meter beside the sequence check: a
// red low-priority report reads the expected number without moving it
// on, seq_peek, and is dropped) and through the software translator's
// (SeqTracker.Check, the meter, Unaccept of a report not taken), step by
// step: the same verdicts, the same ACKs and NACKs. The software
// tracker repeats NACKs without an interval here, as the switch does.
// The reports come after the bucket has emptied, and a token comes back
// only where the test says; a duplicate or a gap takes a token on the
// switch and none in software (the meter runs beside the check), so the
// test takes one from the software translator's bucket too.
func TestMeterUnaccept(t *testing.T) {
	tr, m := meteredModel(t)
	f := tr.FlowControl
	src := tr.Peers[0].IP
	seq := dtatranslator.NewSeqTracker()
	seq.NackInterval = 0
	seq.Expect(src, 5)
	sw := dtatranslator.Meter{Rate: float64(f.Rate), Burst: float64(f.Burst)}
	expected := uint8(5) // the switch's expected_seq
	now := int64(1e9)
	// Empty both buckets.
	for range f.Burst {
		sw.Take(1, now)
		m.decide(t, 0, 0, 8, now)
	}
	type answer struct {
		verdict string
		ack     bool
		nack    bool
		seq     uint8
	}
	// switchStep is translator.p4's ingress for a retransmittable report
	// of a tracked reporter with ACKs.
	switchStep := func(s uint8, dscp uint8) answer {
		v, _ := m.decide(t, 0, dscp, 8, now)
		old := expected
		if v != flowDropped && expected == s {
			expected++ // seq_check; seq_peek for a red low-priority report
		}
		switch d := s - old; {
		case d == 0 && v == flowDropped:
			return answer{verdict: "dropped"}
		case d == 0 && s&15 == 15:
			return answer{verdict: v.String(), ack: true, seq: s}
		case d == 0:
			return answer{verdict: v.String()}
		case d&0x80 != 0:
			return answer{verdict: "duplicate", ack: true, seq: old - 1}
		}
		return answer{verdict: "gap", ack: true, nack: true, seq: old}
	}
	softStep := func(s uint8, dscp uint8) answer {
		r := dtawire.Report{Opcode: dtawire.OpAppend, ListID: 7, Data: []byte{0, 0, 0, 1}}
		v, ack, nack, as := seq.Check(src, s, now)
		if v != dtatranslator.SeqAccept {
			// The switch's meter took a token for it (it runs beside
			// the check): the difference the package doc names, given
			// to the software translator's bucket too.
			sw.Take(1, now)
		}
		switch v {
		case dtatranslator.SeqDuplicate:
			return answer{verdict: "duplicate", ack: ack, seq: as}
		case dtatranslator.SeqGap:
			return answer{verdict: "gap", ack: ack, nack: nack, seq: as}
		}
		if !sw.Take(dtatranslator.Cost(&r), now) {
			if int(dscp) < f.highDSCP() {
				seq.Unaccept(src)
				return answer{verdict: "dropped"}
			}
			return answer{verdict: flowToCPU.String(), ack: ack, seq: as}
		}
		return answer{verdict: flowTranslate.String(), ack: ack, seq: as}
	}
	token := func() {
		now += 1e6 // one token at 1000 a second
	}
	steps := []struct {
		what     string
		seq      uint8
		dscp     uint8
		token    bool // a token comes back before the report
		want     string
		nackWant bool
	}{
		{"low, red: dropped, not taken", 5, 0, false, "dropped", false},
		{"the next, a gap now: NACK of 5", 6, 0, true, "gap", true},
		{"the resend of 5, green", 5, 0, true, "translate", false},
		{"high, red: to the CPU, taken", 6, 46, false, "to CPU", false},
		{"low, red: dropped", 7, 0, false, "dropped", false},
		{"the resend of 5 again: a duplicate", 5, 0, true, "duplicate", false},
		{"7 resent, green", 7, 0, true, "translate", false},
	}
	for _, st := range steps {
		if st.token {
			token()
		}
		hw, soft := switchStep(st.seq, st.dscp), softStep(st.seq, st.dscp)
		if hw != soft || hw.verdict != st.want || hw.nack != st.nackWant {
			t.Errorf("%s: the switch %+v, the software translator %+v, want %s", st.what, hw, soft, st.want)
		}
	}
}
