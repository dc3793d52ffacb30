package soft

import (
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/verbs/dcqcn"
)

// CNPScope says which packets share one CNP pacing timer at the notification
// point (the receiver of ECN-marked packets). Lumina found that NICs differ
// here: ConnectX-6 Dx paces per port, ConnectX-4 Lx and ConnectX-5 per
// destination IP, so a test that expects one CNP per interval must know which.
type CNPScope uint8

// Pacing scopes.
const (
	// CNPPerPort: one timer for the whole port.
	CNPPerPort CNPScope = iota
	// CNPPerDestIP: one timer per IP address the CNPs go to.
	CNPPerDestIP
	// CNPPerQP: one timer per local QP.
	CNPPerQP
)

func (s CNPScope) String() string {
	switch s {
	case CNPPerPort:
		return "per-port"
	case CNPPerDestIP:
		return "per-dest-ip"
	case CNPPerQP:
		return "per-qp"
	}
	return fmt.Sprintf("cnp-scope(%d)", uint8(s))
}

// Profile holds the behaviour knobs in which real RNICs differ, so that tests
// and the lab can make the soft RNIC behave like a given ConnectX generation.
// The zero value is not meaningful; start from a preset (ProfileCX5 is the
// default) and change fields.
type Profile struct {
	Name string

	// DCQCN notification point: send CNPs for ECN-CE packets.
	CNPEnable bool
	// CNPScope and MinTimeBetweenCNPs shape the CNP pacer
	// (min_time_between_cnps of mlx5; 0 sends a CNP for every CE packet).
	CNPScope           CNPScope
	MinTimeBetweenCNPs time.Duration
	// NAKTriggersCNP makes the responder send a (paced) CNP along with each
	// NAK sequence error, as recent Mellanox RNICs do for lossy RoCE.
	NAKTriggersCNP bool
	// DCQCNRate enables the reaction point: a CNP is handled (rp_cnp_handled)
	// instead of ignored (rp_cnp_ignored) and cuts the rate of the QP it is
	// for, which then paces its requests with DCQCN (package dcqcn).
	DCQCNRate bool
	// DCQCN are the reaction point's parameters; a zero LineRate means
	// dcqcn.Defaults at the port's speed (100 Gbit/s when the port does not
	// say).
	DCQCN dcqcn.Params

	// AdaptiveRetrans models mlx5's adaptive retransmission: the first
	// retransmission timeouts of a QP are a fraction of the configured one
	// and grow with consecutive losses, and the retry budget differs from
	// retry_cnt by AdaptiveExtraRetries.
	AdaptiveRetrans bool
	// AdaptiveExtraRetries are the retries adaptive retransmission grants
	// beyond retry_cnt to a QP's first, second, ... message, the last entry
	// for every later one. Lumina's Table 2 (retry_cnt 7, the tail of each
	// of five 10 KB WRITEs dropped until the QP gives up) has 13, 8, 7, 7,
	// 7 on CX4 and 13, 8, 8, 8, 8 on CX5 and CX6; the paper gives the
	// counts, not the NIC's rule, so the presets carry them as they are.
	AdaptiveExtraRetries []int
	// NAKReactionDelay is the time between receiving a NAK and queueing
	// the go-back-N retransmission (CX4 does it in firmware: ~150-200 us;
	// CX5 and CX6 in hardware: a few microseconds). The QP builds no new
	// frames meanwhile; those already in the transmit pipeline go out
	// first.
	NAKReactionDelay time.Duration
	// TxPipeline is how many built frames the NIC holds that its port has
	// not sent yet (0: four bursts). A port that takes frames only at its
	// line rate, as the Lumina twin's links do, keeps it full while a
	// message lasts, and a retransmission queued behind it waits for it to
	// drain when that takes longer than the NAK's processing: the
	// retransmission latency that grows with message size and with how
	// early in a long message the loss is (Lumina's Figures 9(b) and 10).
	TxPipeline int
	// NAKGenerationDelay is the responder's time from receiving an
	// out-of-sequence packet to sending its NAK (Lumina's Figure 8: about
	// 1.1 us at the switch for CX4, CX5 and CX6, the path to and from the
	// switch included). Zero sends it in the same loop iteration.
	NAKGenerationDelay time.Duration

	// FaultSkipNAKedPSN breaks Go-back-N on purpose: after a NAK sequence
	// error the requester resumes one packet after the NAKed PSN, so the
	// lost packet is only resent when the retransmission timer fires. It
	// exists to prove that Lumina's analyzers catch a faulty RNIC; no
	// preset sets it.
	FaultSkipNAKedPSN bool

	// AckEvery makes the requester ask for an ACK (BTH AckReq) every
	// AckEvery packets of a long message besides the last packet of each
	// message; the responder ACKs on AckReq and coalesces the rest per
	// receive burst.
	AckEvery int
	// MaxInflight bounds the unacknowledged packets of one QP.
	MaxInflight int

	// ARPInterval and ARPRetries drive neighbour resolution for IPv4 GIDs.
	ARPInterval time.Duration
	ARPRetries  int
}

// defaultARPInterval spaces neighbour solicitations. Half a second for
// five tries covers kernel ports (AF_PACKET hands frames over up to a block
// timeout late) and loaded hosts; Linux itself waits a second per try.
const defaultARPInterval = 100 * time.Millisecond

// The NAK timings of the presets, from Lumina's Figures 8 and 9 (20 KB and
// 100 KB WRITEs, one packet dropped), which are measured at the switch:
// each figure is the NIC's own time plus the path between the switch and
// the NIC. The parameters are the NIC's share, the figure less the path of
// the Lumina twin's links at the speed of the paper's testbed for that NIC
// (2 x 50 ns propagation, a 1 KB frame's serialisation and the NAK's: about
// 0.2 us at 100 Gbit/s for CX5 and CX6, 0.34 us at 40 Gbit/s for the CX4
// Lx), so the twin's analyzers, reading its trace as Lumina's read the
// switch's, find the paper's figures:
//   - NACK generation: ~1.1 us on CX4, CX5 and CX6 (the CX4's 13 us when
//     one of the last packets of a message is lost is not modelled);
//   - NACK reaction: 150-200 us on CX4 (go-back-N in firmware), 3-6 us on
//     CX5 and CX6 (in hardware; when the transmit pipeline holds more than
//     the reaction's worth of frames, the retransmission waits for them).
const (
	nakGeneration    = 900 * time.Nanosecond
	nakGenerationCX4 = 760 * time.Nanosecond
	nakReactionCX4   = 175 * time.Microsecond
	nakReactionCX5   = 3 * time.Microsecond
	// txPipelineCX5 is the CX5/CX6 transmit pipeline in 1 KB frames, from
	// Figure 9(b) (a 100 KB WRITE, one packet dropped): an early loss
	// waits about 6 us, the drain of a full pipeline (less the twin's
	// 0.2 us path: 66 frames of 88.8 ns at 100 Gbit/s), and that holds up
	// to about the 20th packet, the last whose NAK still finds the
	// pipeline full (100 packets less the 20 and the 13 sent during the
	// NAK's round: 67). Figure 10's growth from about 50 KB then follows:
	// from there the pipeline holds more than the 3 us of the NAK's
	// processing when the NAK arrives. Its end at about 120 KB does not:
	// the pipeline is full from about 85 KB on (see the twin's tests).
	txPipelineCX5 = 66
)

// Named presets. The numbers are the ones Lumina measured; where a generation
// was not measured, the next one's behaviour is used.
var (
	ProfileCX4 = Profile{Name: "cx4", CNPEnable: true, CNPScope: CNPPerDestIP, MinTimeBetweenCNPs: 4 * time.Microsecond,
		AdaptiveExtraRetries: []int{6, 1, 0}, NAKTriggersCNP: false, NAKReactionDelay: nakReactionCX4, NAKGenerationDelay: nakGenerationCX4, AckEvery: 16, MaxInflight: 1024,
		ARPInterval: defaultARPInterval, ARPRetries: 5}
	ProfileCX5 = Profile{Name: "cx5", CNPEnable: true, CNPScope: CNPPerDestIP, MinTimeBetweenCNPs: 4 * time.Microsecond,
		AdaptiveExtraRetries: []int{6, 1}, NAKTriggersCNP: true, NAKReactionDelay: nakReactionCX5, NAKGenerationDelay: nakGeneration, TxPipeline: txPipelineCX5, AckEvery: 16, MaxInflight: 1024,
		ARPInterval: defaultARPInterval, ARPRetries: 5}
	ProfileCX6 = Profile{Name: "cx6", CNPEnable: true, CNPScope: CNPPerPort, MinTimeBetweenCNPs: 4 * time.Microsecond,
		AdaptiveExtraRetries: []int{6, 1}, NAKTriggersCNP: true, NAKReactionDelay: nakReactionCX5, NAKGenerationDelay: nakGeneration, TxPipeline: txPipelineCX5, AckEvery: 16, MaxInflight: 1024,
		ARPInterval: defaultARPInterval, ARPRetries: 5}
)

// ProfileE810 is Intel's E810 (irdma) as Lumina's checks take it: its
// notification point has no CNP pacer to configure (irdma has no
// min_time_between_cnps; Lumina's test_cnp checks an E810 with an interval
// of 0, so every CE-marked packet must draw a CNP, whatever the pacing
// mode) and it sends no CNP with a NAK (Lumina's NACK_TRIGGER_CNP table).
// Its retransmission timing was not measured by Lumina: those knobs are
// the CX5 preset's.
var ProfileE810 = func() Profile {
	p := ProfileCX5
	p.Name, p.CNPScope, p.MinTimeBetweenCNPs, p.NAKTriggersCNP = "e810", CNPPerPort, 0, false
	return p
}()

// Profiles lists the presets by name.
func Profiles() map[string]Profile {
	return map[string]Profile{"cx4": ProfileCX4, "cx5": ProfileCX5, "cx6": ProfileCX6, "e810": ProfileE810}
}

// ProfileByName returns a preset.
func ProfileByName(name string) (Profile, error) {
	p, ok := Profiles()[name]
	if !ok {
		return Profile{}, fmt.Errorf("soft: unknown profile %q (have cx4, cx5, cx6, e810)", name)
	}
	return p, nil
}

// withDefaults fills the fields a hand-made profile left zero.
func (p Profile) withDefaults() Profile {
	if p.Name == "" && p.AckEvery == 0 && p.MaxInflight == 0 && p.ARPInterval == 0 {
		return ProfileCX5
	}
	if p.AckEvery <= 0 {
		p.AckEvery = 16
	}
	if p.MaxInflight <= 0 {
		p.MaxInflight = 1024
	}
	if p.ARPInterval <= 0 {
		p.ARPInterval = defaultARPInterval
	}
	if p.ARPRetries <= 0 {
		p.ARPRetries = 5
	}
	if p.AdaptiveExtraRetries == nil {
		p.AdaptiveExtraRetries = ProfileCX5.AdaptiveExtraRetries
	}
	return p
}
