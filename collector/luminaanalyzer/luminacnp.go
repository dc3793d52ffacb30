package luminaanalyzer

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

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
// timestamps for the NIC's: a mark reaches the NIC a link's delay after the
// switch saw it, a NAK reaches the switch a link's delay after the NIC
// decided, so the two agree only to within those delays (on the twin, whose
// links have fixed delays, marks of one frame size are exact; a NAK next
// to an interval's edge could fall on the other side by the path).

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
	return LuminaCNPCheck(ctx, m.tracePath(dir), m)
}

// LuminaCNPCheck runs Lumina's CNP check over the merged trace of a WRITE,
// SEND or READ test (send_read mixes receivers per QP, which meta.json does
// not tell apart; it is refused).
func LuminaCNPCheck(ctx context.Context, tracePath string, m *Meta) (*LuminaCNP, error) {
	c, err := newLuminaCNPCheck(m)
	if err != nil {
		return nil, err
	}
	if err := eachRecord(ctx, tracePath, func(_ int64, data []byte) { c.packet(data) }); err != nil {
		return nil, err
	}
	return c.result(), nil
}

// cnpPair is an IP pair: data sender, data receiver.
type cnpPair struct{ snd, rcv netip.Addr }

// cnpGroup is one group of a mode and its pacer as the check replays it.
type cnpGroup struct {
	g    LuminaCNPGroup
	last int64
	any  bool
}

// luminaCNPCheck is the check's state over one trace: the connections' IP
// pairs and senders, and per mode its groups (per port one, per IP pair
// one per pair, per destination IP one per data sender).
type luminaCNPCheck struct {
	out     *LuminaCNP
	pairs   []cnpPair
	senders []netip.Addr
	groups  [3][]*cnpGroup
	p       roce.Packet
}

var luminaCNPModes = [3]string{ScopePort, ScopeIPPair, ScopeDestIP}

func newLuminaCNPCheck(m *Meta) (*luminaCNPCheck, error) {
	c := &luminaCNPCheck{out: &LuminaCNP{Receiver: "responder"}}
	nic := m.ResponderNIC
	switch m.Geometry.Verb {
	case intent.VerbRead:
		c.out.Receiver, nic = "requester", m.RequesterNIC
	case intent.VerbSendRead:
		return nil, fmt.Errorf("lumina: the CNP check of send_read needs its SEND and READ QPs apart")
	}
	c.out.NIC = strings.ToUpper(nic.Type)
	if c.out.NIC != "E810" {
		// ConnectX: the NP's enable, slow restart and the interval, as
		// the file sets them; an E810 is checked with none of them.
		c.out.NACKTriggersCNP = LuminaCNPNACKTrigger[c.out.NIC] && nic.DCQCNNPEnable && nic.SlowRestart
		c.out.MinTimeNs = nic.MinTimeBetweenCNPs
	}
	for i, cn := range m.Conns {
		if !cn.RequesterIP.IsValid() || !cn.ResponderIP.IsValid() {
			continue
		}
		src, dst, _ := intent.DataDirection(i, cn, m.Geometry, intent.Options{})
		p := cnpPair{netip.AddrFrom16(src).Unmap(), netip.AddrFrom16(dst).Unmap()}
		if !slices.Contains(c.pairs, p) {
			c.pairs = append(c.pairs, p)
		}
	}
	slices.SortFunc(c.pairs, func(a, b cnpPair) int {
		if d := a.snd.Compare(b.snd); d != 0 {
			return d
		}
		return a.rcv.Compare(b.rcv)
	})
	for _, p := range c.pairs {
		if !slices.Contains(c.senders, p.snd) {
			c.senders = append(c.senders, p.snd)
		}
	}
	c.groups[0] = []*cnpGroup{{g: LuminaCNPGroup{Key: "port"}}}
	for _, p := range c.pairs {
		c.groups[1] = append(c.groups[1], &cnpGroup{g: LuminaCNPGroup{Key: p.snd.String() + "->" + p.rcv.String()}})
	}
	for _, s := range c.senders {
		c.groups[2] = append(c.groups[2], &cnpGroup{g: LuminaCNPGroup{Key: s.String()}})
	}
	return c, nil
}

// of returns the pair's group in every mode; ok is false when no
// connection has the pair.
func (c *luminaCNPCheck) of(p cnpPair) (gs [3]*cnpGroup, ok bool) {
	ip := slices.Index(c.pairs, p)
	if ip < 0 {
		return gs, false
	}
	return [3]*cnpGroup{c.groups[0][0], c.groups[1][ip], c.groups[2][slices.Index(c.senders, p.snd)]}, true
}

// packet takes one record of the trace, in switch order.
func (c *luminaCNPCheck) packet(data []byte) {
	p := &c.p
	if roce.ParseTruncated(data, roce.UDPPort, p) != nil {
		return
	}
	np := p.Net
	meta, err := mirror.Read(data, &np)
	if err != nil {
		return
	}
	src := netip.AddrFrom16(p.SrcGID(data)).Unmap()
	dst := netip.AddrFrom16(p.DstGID(data)).Unmap()
	switch {
	case p.Info().Payload && meta.Event == mirror.EventECN:
		// A data packet of the pair (src, dst), marked: a trigger.
		if gs, ok := c.of(cnpPair{src, dst}); ok {
			for _, g := range gs {
				g.g.ECNs++
				c.trigger(g, meta.Timestamp)
			}
		}
	case p.IsCNP():
		// A CNP goes back to the data sender.
		if gs, ok := c.of(cnpPair{dst, src}); ok {
			for _, g := range gs {
				g.g.CNPs++
			}
		}
	default:
		if a := p.AETH(data); a != nil && a.Syndrome().IsNAK() {
			if gs, ok := c.of(cnpPair{dst, src}); ok {
				for _, g := range gs {
					g.g.NACKs++
					if c.out.NACKTriggersCNP {
						c.trigger(g, meta.Timestamp)
					}
				}
			}
		}
	}
}

// trigger expects a CNP of the group unless its last expected one is at
// most the interval before ts.
func (c *luminaCNPCheck) trigger(g *cnpGroup, ts int64) {
	if !g.any || ts-g.last > c.out.MinTimeNs {
		g.last, g.any = ts, true
		g.g.Expected++
	}
}

// result is the verdict per mode: every group's expected count must be
// the CNPs it holds.
func (c *luminaCNPCheck) result() *LuminaCNP {
	out := *c.out
	out.Modes = nil
	for i, mode := range luminaCNPModes {
		lm := LuminaCNPMode{Mode: mode, Pass: true}
		for _, g := range c.groups[i] {
			lm.Groups = append(lm.Groups, g.g)
			if g.g.Expected != g.g.CNPs {
				lm.Pass = false
			}
		}
		out.Modes = append(out.Modes, lm)
	}
	return &out
}
