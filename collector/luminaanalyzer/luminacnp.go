package luminaanalyzer

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Lumina's own CNP check, the one its e2e test_cnp runs on a result: for
// each pacing mode (per NIC port, per IP pair, per destination IP of the
// CNPs) it derives from the trace how many CNPs the receiver should have
// sent and compares with the CNPs the trace holds. The rule is the check's,
// restated:
//
//   - a trigger is a data packet the switch marked with ECN (its mirror
//     event, not the IP ECN bits) of one of the connections' IP pairs, and,
//     when the receiver sends a CNP with each NAK, a NAK of such a pair;
//   - in switch order, a trigger is expected to draw a CNP when its group
//     has none yet, or when its switch ingress timestamp is more than
//     min-time-between-cnps after the group's last expected one (strictly
//     more; a suppressed trigger does not restart the interval);
//   - the group is the whole port, the IP pair, or the data sender's IP
//     (the CNP's destination) by mode.
//
// Unlike the appliance's own CNP analysis (cnp.go), which infers the pacer
// from bounds that hold whatever the NIC's delays, this takes the switch's
// timestamps for the NIC's: on hardware that is right to within the link's
// delay, and on the twin, whose links have fixed delays, exact.

// LuminaCNPNACKTrigger is Lumina's NACK_TRIGGER_CNP table: the NICs that
// send a CNP along with a NAK (when the notification point is enabled and,
// on ConnectX, slow restart is on).
var LuminaCNPNACKTrigger = map[string]bool{"E810": false, "CX4": false, "CX5": true, "CX6": true}

// LuminaCNP is Lumina's CNP check of one run.
type LuminaCNP struct {
	// Receiver is the node whose CNPs are checked (the data receiver:
	// the responder, the requester for READ), NIC its type.
	Receiver string `json:"receiver"`
	NIC      string `json:"nic"`
	// NACKTriggersCNP and MinTimeNs are the inputs test_cnp derives from
	// the receiver's configuration (an E810 is checked with no interval
	// and no CNP with a NAK, as Lumina checks it).
	NACKTriggersCNP bool  `json:"nack_triggers_cnp"`
	MinTimeNs       int64 `json:"min_time_between_cnps_ns"`
	// Modes holds one verdict per pacing mode, in test_cnp's order.
	Modes []LuminaCNPMode `json:"modes"`
}

// LuminaCNPMode is one pacing mode's verdict.
type LuminaCNPMode struct {
	Mode   string           `json:"mode"` // ScopePort, ScopeIPPair or ScopeDestIP
	Groups []LuminaCNPGroup `json:"groups"`
	Pass   bool             `json:"pass"`
}

// LuminaCNPGroup is one group of a mode: its triggers and CNPs.
type LuminaCNPGroup struct {
	Key      string `json:"key"`
	ECNs     int    `json:"ecns"`
	NACKs    int    `json:"nacks"`
	Expected int    `json:"expected"`
	CNPs     int    `json:"cnps"`
}

// Mode returns the verdict of one mode (nil when there is none).
func (l *LuminaCNP) Mode(mode string) *LuminaCNPMode {
	for i := range l.Modes {
		if l.Modes[i].Mode == mode {
			return &l.Modes[i]
		}
	}
	return nil
}

// Passing lists the modes whose expected counts match the trace.
func (l *LuminaCNP) Passing() []string {
	var out []string
	for _, m := range l.Modes {
		if m.Pass {
			out = append(out, m.Mode)
		}
	}
	return out
}

// String is a one-line summary: per mode, expected against actual.
func (l *LuminaCNP) String() string {
	var parts []string
	for _, m := range l.Modes {
		var e, a []string
		for _, g := range m.Groups {
			e, a = append(e, fmt.Sprint(g.Expected)), append(a, fmt.Sprint(g.CNPs))
		}
		verdict := "FAIL"
		if m.Pass {
			verdict = "pass"
		}
		parts = append(parts, fmt.Sprintf("%s %s (expected %s, sent %s)", m.Mode, verdict, strings.Join(e, "/"), strings.Join(a, "/")))
	}
	return strings.Join(parts, "; ")
}

// LuminaCNPCheckDir runs LuminaCNPCheck on a run directory (meta.json and
// the trace it names).
func LuminaCNPCheckDir(ctx context.Context, dir string) (*LuminaCNP, error) {
	m, err := ReadMeta(dir)
	if err != nil {
		return nil, fmt.Errorf("lumina: %w", err)
	}
	trace := m.Trace
	if !filepath.IsAbs(trace) {
		trace = filepath.Join(dir, trace)
	}
	return LuminaCNPCheck(ctx, trace, m)
}

// LuminaCNPCheck runs Lumina's CNP check over the merged trace of a WRITE,
// SEND or READ test (send_read mixes receivers per QP, which meta.json does
// not tell apart; it is refused).
func LuminaCNPCheck(ctx context.Context, tracePath string, m *Meta) (*LuminaCNP, error) {
	out := &LuminaCNP{Receiver: "responder"}
	nic := m.ResponderNIC
	switch m.Geometry.Verb {
	case intent.VerbRead:
		out.Receiver, nic = "requester", m.RequesterNIC
	case intent.VerbSendRead:
		return nil, fmt.Errorf("lumina: the CNP check of send_read needs its SEND and READ QPs apart")
	}
	out.NIC = strings.ToUpper(nic.Type)
	if out.NIC != "E810" {
		// ConnectX: the NP's enable, slow restart and the interval, as
		// the file sets them; an E810 is checked with none of them.
		out.NACKTriggersCNP = LuminaCNPNACKTrigger[out.NIC] && nic.DCQCNNPEnable && nic.SlowRestart
		out.MinTimeNs = nic.MinTimeBetweenCNPs
	}
	// The IP pairs (data sender, data receiver) of the connections.
	type pair struct{ snd, rcv netip.Addr }
	var pairs []pair
	for i, c := range m.Conns {
		src, dst, _ := intent.DataDirection(i, c, m.Geometry, intent.Options{})
		p := pair{netip.AddrFrom16(src).Unmap(), netip.AddrFrom16(dst).Unmap()}
		if !slices.Contains(pairs, p) {
			pairs = append(pairs, p)
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := a.snd.Compare(b.snd); c != 0 {
			return c
		}
		return a.rcv.Compare(b.rcv)
	})
	var senders []netip.Addr
	for _, p := range pairs {
		if !slices.Contains(senders, p.snd) {
			senders = append(senders, p.snd)
		}
	}
	// Per mode, the groups and each group's pacing state.
	type state struct {
		g    LuminaCNPGroup
		last int64
		any  bool
	}
	modes := []string{ScopePort, ScopeIPPair, ScopeDestIP}
	groups := make([][]*state, len(modes))
	groups[0] = []*state{{g: LuminaCNPGroup{Key: "port"}}}
	for _, p := range pairs {
		groups[1] = append(groups[1], &state{g: LuminaCNPGroup{Key: p.snd.String() + "->" + p.rcv.String()}})
	}
	for _, s := range senders {
		groups[2] = append(groups[2], &state{g: LuminaCNPGroup{Key: s.String()}})
	}
	find := func(p pair) (ip, snd int) {
		return slices.Index(pairs, p), slices.Index(senders, p.snd)
	}

	r, err := pcap.Open(tracePath)
	if err != nil {
		return nil, fmt.Errorf("lumina: %w", err)
	}
	defer r.Close()
	var rec pcap.Record
	var p roce.Packet
	for n := 0; ; n++ {
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if err := r.Next(&rec); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("lumina: reading %s: %w", tracePath, err)
		}
		if roce.ParseTruncated(rec.Data, roce.UDPPort, &p) != nil {
			continue
		}
		np := p.Net
		meta, err := mirror.Read(rec.Data, &np)
		if err != nil {
			continue
		}
		src := netip.AddrFrom16(p.SrcGID(rec.Data)).Unmap()
		dst := netip.AddrFrom16(p.DstGID(rec.Data)).Unmap()
		info := p.Info()
		var counted func(*state)
		var ip, snd int
		trigger := false
		switch {
		case info.Payload && meta.Event == mirror.EventECN:
			// A data packet of the pair (src, dst), marked.
			if ip, snd = find(pair{src, dst}); ip >= 0 {
				counted, trigger = func(s *state) { s.g.ECNs++ }, true
			}
		case p.IsCNP():
			if ip, snd = find(pair{dst, src}); ip >= 0 {
				for _, s := range []*state{groups[0][0], groups[1][ip], groups[2][snd]} {
					s.g.CNPs++
				}
			}
			continue
		default:
			if a := p.AETH(rec.Data); a != nil && a.Syndrome().IsNAK() {
				if ip, snd = find(pair{dst, src}); ip >= 0 {
					counted, trigger = func(s *state) { s.g.NACKs++ }, out.NACKTriggersCNP
				}
			}
		}
		if counted == nil {
			continue
		}
		for _, s := range []*state{groups[0][0], groups[1][ip], groups[2][snd]} {
			counted(s)
			if trigger && (!s.any || meta.Timestamp-s.last > out.MinTimeNs) {
				s.last, s.any = meta.Timestamp, true
				s.g.Expected++
			}
		}
	}
	for i, mode := range modes {
		lm := LuminaCNPMode{Mode: mode, Pass: true}
		for _, s := range groups[i] {
			lm.Groups = append(lm.Groups, s.g)
			if s.g.Expected != s.g.CNPs {
				lm.Pass = false
			}
		}
		out.Modes = append(out.Modes, lm)
	}
	return out, nil
}
