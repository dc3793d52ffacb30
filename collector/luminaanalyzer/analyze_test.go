package luminaanalyzer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

const (
	drop   = mirror.EventDrop
	ecn    = mirror.EventECN
	biterr = mirror.EventBitError
)

// writeDropNAK is the fast retransmission of Lumina §6.2: the second
// packet of a 4-packet WRITE is dropped, the third arrives out of order,
// the responder NAKs 6 us later and the requester goes back 3 us after
// the NAK.
func writeDropNAK(t testing.TB, ev mirror.EventType) (*ttrace, map[string]uint64) {
	tr := newTrace(t, intent.VerbWrite, 1)
	p := tr.ipsn(0)
	s := tr.msg(0, p, map[int]mirror.EventType{1: ev})
	seqs := map[string]uint64{"lost": s[1], "ooo": s[2]}
	tr.after(5 * time.Microsecond)
	seqs["nak"] = tr.nak(0, p+1)
	tr.after(3 * time.Microsecond)
	seqs["retx"] = tr.resend(0, p, p+1, p+3, nil)[0]
	seqs["ack"] = tr.ack(0, p+3)
	return tr, seqs
}

func TestNACKLatency(t *testing.T) {
	for _, ev := range []mirror.EventType{drop, biterr} {
		t.Run(ev.String(), func(t *testing.T) {
			tr, seqs := writeDropNAK(t, ev)
			rep := tr.analyze()
			wantCompliant(t, rep)
			if len(rep.Retransmission.NACK) != 1 {
				t.Fatalf("NACK records: %+v", rep.Retransmission.NACK)
			}
			n := rep.Retransmission.NACK[0]
			// First out-of-order packet at T, the last packet of the
			// message at T+1us, the NAK 5us later, the retransmission
			// 3us after the NAK.
			want := NACKLatency{Conn: 0, Stream: "request", PSN: tr.ipsn(0) + 1, Message: 0, RelPSN: 1, Event: ev,
				GenerationNs: 6000, ReactionNs: 3000, TotalNs: 9000}
			got := n
			got.FirstOOO, got.NAK, got.Retx = PacketRef{}, PacketRef{}, PacketRef{}
			if got != want {
				t.Fatalf("NACK record\n got %+v\nwant %+v", got, want)
			}
			if n.FirstOOO.Seq != seqs["ooo"] || n.NAK.Seq != seqs["nak"] || n.Retx.Seq != seqs["retx"] {
				t.Fatalf("NACK packets %+v, want seqs %v", n, seqs)
			}
			ls := rep.Retransmission.Losses
			if len(ls) != 1 || ls[0].Packet.Seq != seqs["lost"] || ls[0].RecoveredBy != "nak" || ls[0].Retx.Seq != seqs["retx"] ||
				ls[0].LatencyNs != ls[0].Retx.TimestampNs-ls[0].Packet.TimestampNs {
				t.Fatalf("losses %+v", ls)
			}
			if rep.Retransmission.Generation.MedianNs != 6000 || rep.Retransmission.Reaction.MaxNs != 3000 {
				t.Fatalf("stats %+v %+v", rep.Retransmission.Generation, rep.Retransmission.Reaction)
			}
			if len(rep.Timeouts.Retransmissions) != 0 {
				t.Fatalf("a NAK-triggered retransmission counted as a timeout: %+v", rep.Timeouts.Retransmissions)
			}
			c := rep.Connections[0]
			if c.Gaps != 1 || c.NAKs != 1 || c.OutOfOrder != 2 || c.Retransmitted != 3 || c.Lost != 1 || c.DataPackets != 7 {
				t.Fatalf("connection %+v", c)
			}
		})
	}
}

// TestGBNSenderViolations: senders that do not go back where they must are
// caught, the offending packet named.
func TestGBNSenderViolations(t *testing.T) {
	t.Run("restart after the NAKed PSN", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		nak := tr.nak(0, p+1)
		bad := tr.resend(0, p, p+2, p+3, nil)[0]
		rep := tr.analyze()
		wantViolation(t, rep, "request sender", bad, "after the NAK for PSN")
		if !strings.Contains(rep.GBN.Violations[0].Reason, "seq "+itoa(nak)) {
			t.Fatalf("reason does not name the NAK: %q", rep.GBN.Violations[0].Reason)
		}
	})
	t.Run("restart before the NAKed PSN", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{2: drop})
		nak := tr.nak(0, p+2)
		re := tr.resend(0, p, p+1, p+3, nil)
		rep := tr.analyze()
		wantViolation(t, rep, "request sender", re[0], "restarted at PSN "+itoa(uint64(p+1)))
		// The reaction is measured one way all the same: from the NAK to
		// the first transmission of the NAKed PSN after it.
		if n := rep.Retransmission.NACK; len(n) != 1 || n[0].NAK.Seq != nak || n[0].Retx.Seq != re[1] ||
			n[0].ReactionNs != n[0].Retx.TimestampNs-n[0].NAK.TimestampNs {
			t.Fatalf("NACK %+v", n)
		}
	})
	t.Run("skips a retransmission", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		tr.nak(0, p+1)
		tr.resend(0, p, p+1, p+1, nil)
		bad := tr.resend(0, p, p+3, p+3, nil)[0]
		wantViolation(t, tr.analyze(), "request sender", bad, "skips PSN "+itoa(uint64(p+2)))
	})
	t.Run("never sends a PSN", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.data(0, p, p, 0)
		tr.data(0, p, p+1, 0)
		bad := tr.data(0, p, p+3, 0)
		wantViolation(t, tr.analyze(), "request sender", bad, "PSN jumps from "+itoa(uint64(p+2)))
	})
	t.Run("abandons its retransmission", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		tr.nak(0, p+1)
		tr.resend(0, p, p+1, p+2, nil)
		bad := tr.data(0, p+4, p+4, 0) // the next message, before PSN p+3 went again
		wantViolation(t, tr.analyze(), "request sender", bad, "had only reached PSN "+itoa(uint64(p+3)))
	})
	t.Run("timeout skips the oldest unacknowledged", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{2: drop, 3: drop})
		tr.ack(0, p+1)
		tr.after(70 * time.Millisecond)
		bad := tr.resend(0, p, p+3, p+3, nil)[0]
		wantViolation(t, tr.analyze(), "request sender", bad, "skipping PSN "+itoa(uint64(p+2)))
	})
	t.Run("timeout resends what was acknowledged long before", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{3: drop})
		tr.ack(0, p+2)
		tr.after(70 * time.Millisecond)
		bad := tr.resend(0, p, p+1, p+3, nil)[0]
		wantViolation(t, tr.analyze(), "request sender", bad, "the oldest unacknowledged PSN was "+itoa(uint64(p+3)))
	})
	t.Run("timeout racing an ACK in flight is fine", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{3: drop})
		tr.after(70 * time.Millisecond)
		tr.ack(0, p+2) // mirrored just before the timer fired at the requester
		tr.resend(0, p, p+2, p+3, nil)
		tr.ack(0, p+3)
		wantCompliant(t, tr.analyze())
	})
}

// TestGBNReceiverViolations: receivers that NAK wrongly or not at all.
func TestGBNReceiverViolations(t *testing.T) {
	t.Run("second NAK for one gap", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		tr.nak(0, p+1)
		bad := tr.nak(0, p+1)
		tr.resend(0, p, p+1, p+3, nil)
		tr.ack(0, p+3)
		wantViolation(t, tr.analyze(), "request receiver", bad, "second NAK")
	})
	t.Run("NAK for the wrong PSN", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		bad := tr.nak(0, p+2)
		tr.resend(0, p, p+2, p+3, nil)
		rep := tr.analyze()
		if len(rep.GBN.Violations) == 0 || rep.GBN.Violations[0].Packet.Seq != bad ||
			rep.GBN.Violations[0].Machine != "request receiver" {
			t.Fatalf("violations %+v", rep.GBN.Violations)
		}
	})
	t.Run("ACK beyond the hole", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		bad := tr.ack(0, p+3)
		wantViolation(t, tr.analyze(), "request receiver", bad, "had not been received in order")
	})
	t.Run("gap without a NAK", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		s := tr.msg(0, p, map[int]mirror.EventType{1: drop})
		tr.ack(0, p)
		tr.after(70 * time.Millisecond)
		tr.resend(0, p, p+1, p+3, nil)
		bad := tr.ack(0, p+3)
		rep := tr.analyze()
		wantViolation(t, rep, "request receiver", bad, "without a NAK")
		if !strings.Contains(rep.GBN.Violations[0].Reason, "seq "+itoa(s[2])) {
			t.Fatalf("reason does not name the first out-of-order packet: %q", rep.GBN.Violations[0].Reason)
		}
		if len(rep.Timeouts.Retransmissions) != 1 {
			t.Fatalf("the retransmission was a timeout: %+v", rep.Timeouts.Retransmissions)
		}
	})
	t.Run("NAK sent before the gap closed is fine", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		tr.ack(0, p)
		tr.after(70 * time.Millisecond)
		tr.resend(0, p, p+1, p+1, nil) // a timeout, just as the NAK leaves
		tr.nak(0, p+1)
		tr.resend(0, p, p+2, p+3, nil)
		tr.ack(0, p+3)
		wantCompliant(t, tr.analyze())
	})
}

// TestTimeoutRetries: the tail packet dropped on every transmission
// (Lumina §6.3, Table 2): the requester retries retry_cnt times, each
// after the timeout, and gives up.
func TestTimeoutRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
		every   time.Duration
		verdict string
	}{
		{"exact", 7, 70 * time.Millisecond, "exact"},
		{"fewer", 5, 70 * time.Millisecond, "fewer"},
		{"more, adaptive-like", 9, 10 * time.Millisecond, "more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTrace(t, intent.VerbWrite, 1)
			p := tr.ipsn(0)
			tr.resend(0, p, p, p+2, nil)
			tr.ack(0, p+2)
			tr.data(0, p, p+3, drop)
			for range tc.retries {
				tr.after(tc.every)
				tr.resend(0, p, p+3, p+3, map[uint32]mirror.EventType{p + 3: drop})
			}
			rep := tr.analyze()
			wantCompliant(t, rep)
			to := rep.Timeouts
			if len(to.Retransmissions) != tc.retries || to.GiveUps != 1 || to.RetryVerdict != tc.verdict {
				t.Fatalf("timeouts %+v", to)
			}
			for i, r := range to.Retransmissions {
				if r.IntervalNs != int64(tc.every) || r.Retry != i+1 || r.Packet.PSN != p+3 || r.RelPSN != 3 ||
					r.BelowMinimum != (tc.every < 67*time.Millisecond) {
					t.Fatalf("retransmission %d: %+v", i, r)
				}
			}
			if to.MinTimeoutNs != 4096<<14 || to.Intervals.MedianNs != int64(tc.every) {
				t.Fatalf("timeout figures %+v", to)
			}
			if len(to.Messages) != 1 || !to.Messages[0].GaveUp || to.Messages[0].Timeouts != tc.retries ||
				to.Messages[0].MaxRetries != tc.retries || to.Messages[0].PSN != p+3 {
				t.Fatalf("messages %+v", to.Messages)
			}
			if c := rep.Connections[0]; !strings.Contains(c.Terminated, "gave up") || c.Timeouts != int64(tc.retries) {
				t.Fatalf("connection %+v", c)
			}
			if len(rep.Retransmission.NACK) != 0 {
				t.Fatalf("a timeout counted as NAK-triggered: %+v", rep.Retransmission.NACK)
			}
		})
	}
	t.Run("recovered", func(t *testing.T) {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.resend(0, p, p, p+2, nil)
		tr.ack(0, p+2)
		tr.data(0, p, p+3, drop)
		tr.after(70 * time.Millisecond)
		tr.resend(0, p, p+3, p+3, map[uint32]mirror.EventType{p + 3: drop})
		tr.after(80 * time.Millisecond)
		tr.resend(0, p, p+3, p+3, nil)
		tr.ack(0, p+3)
		tr.msg(0, p+4, nil)
		tr.ack(0, p+7)
		rep := tr.analyze()
		wantCompliant(t, rep)
		to := rep.Timeouts
		if to.GiveUps != 0 || len(to.Messages) != 1 || to.Messages[0].GaveUp || to.Messages[0].Timeouts != 2 {
			t.Fatalf("timeouts %+v", to)
		}
		if got := []int64{to.Retransmissions[0].IntervalNs, to.Retransmissions[1].IntervalNs}; !slices.Equal(got,
			[]int64{int64(70 * time.Millisecond), int64(80 * time.Millisecond)}) {
			t.Fatalf("intervals %v", got)
		}
		for _, l := range rep.Retransmission.Losses {
			if l.RecoveredBy != "timeout" {
				t.Fatalf("losses %+v", rep.Retransmission.Losses)
			}
		}
	})
}

// readTrace starts a READ of one message (4 responses) on connection 0.
func readTrace(t *testing.T) (*ttrace, uint32) {
	tr := newTrace(t, intent.VerbRead, 1)
	p := tr.ipsn(0)
	tr.readReq(0, p, 4096)
	return tr, p
}

func TestREAD(t *testing.T) {
	t.Run("gap, re-issue, responses again", func(t *testing.T) {
		tr, p := readTrace(t)
		tr.resp(0, p, p+3, p, 0)
		tr.resp(0, p, p+3, p+1, drop)
		ooo := tr.resp(0, p, p+3, p+2, 0)
		tr.resp(0, p, p+3, p+3, 0)
		tr.after(4 * time.Microsecond)
		re := tr.readReq(0, p+1, 3072)
		tr.after(2 * time.Microsecond)
		retx := tr.resp(0, p+1, p+3, p+1, 0)
		tr.resp(0, p+1, p+3, p+2, 0)
		tr.resp(0, p+1, p+3, p+3, 0)
		tr.readReq(0, p+4, 4096)
		for i := range uint32(4) {
			tr.resp(0, p+4, p+7, p+4+i, 0)
		}
		rep := tr.analyze()
		wantCompliant(t, rep)
		if len(rep.Retransmission.NACK) != 1 {
			t.Fatalf("NACK %+v", rep.Retransmission.NACK)
		}
		n := rep.Retransmission.NACK[0]
		if n.Stream != "response" || n.PSN != p+1 || n.FirstOOO.Seq != ooo || n.NAK.Seq != re || n.Retx.Seq != retx ||
			n.GenerationNs != 5000 || n.ReactionNs != 2000 || n.Event != drop {
			t.Fatalf("NACK %+v", n)
		}
		if c := rep.Connections[0]; c.ReadGaps != 1 || c.Verbs[0] != "read" || c.DataPackets != 11 {
			t.Fatalf("connection %+v", c)
		}
		if l := rep.Retransmission.Losses; len(l) != 1 || l[0].RecoveredBy != "read-gap" || l[0].Stream != "response" {
			t.Fatalf("losses %+v", l)
		}
	})
	t.Run("requester re-issues from the wrong PSN", func(t *testing.T) {
		tr, p := readTrace(t)
		tr.resp(0, p, p+3, p, 0)
		tr.resp(0, p, p+3, p+1, drop)
		tr.resp(0, p, p+3, p+2, 0)
		tr.resp(0, p, p+3, p+3, 0)
		bad := tr.readReq(0, p+2, 2048)
		tr.resp(0, p+2, p+3, p+2, 0)
		tr.resp(0, p+2, p+3, p+3, 0)
		wantViolation(t, tr.analyze(), "response receiver", bad, "first missing response is PSN "+itoa(uint64(p+1)))
	})
	t.Run("responder restarts at the wrong PSN", func(t *testing.T) {
		tr, p := readTrace(t)
		tr.resp(0, p, p+3, p, 0)
		tr.resp(0, p, p+3, p+1, drop)
		tr.resp(0, p, p+3, p+2, 0)
		tr.resp(0, p, p+3, p+3, 0)
		tr.readReq(0, p+1, 3072)
		bad := tr.resp(0, p, p+3, p, 0)
		wantViolation(t, tr.analyze(), "response sender", bad, "responses restart at PSN "+itoa(uint64(p)))
	})
	t.Run("responder resends unasked", func(t *testing.T) {
		tr, p := readTrace(t)
		for i := range uint32(4) {
			tr.resp(0, p, p+3, p+i, 0)
		}
		bad := tr.resp(0, p, p+3, p+3, 0)
		wantViolation(t, tr.analyze(), "response sender", bad, "no READ request asked")
	})
	t.Run("tail drop times out", func(t *testing.T) {
		tr, p := readTrace(t)
		tr.resp(0, p, p+3, p, 0)
		tr.resp(0, p, p+3, p+1, 0)
		tr.resp(0, p, p+3, p+2, 0)
		tr.resp(0, p, p+3, p+3, drop)
		tr.after(70 * time.Millisecond)
		tr.readReq(0, p+3, 1024)
		tr.resp(0, p+3, p+3, p+3, 0)
		rep := tr.analyze()
		wantCompliant(t, rep)
		// The timer ran from the last progress, response p+2, one step
		// before the lost one.
		to := rep.Timeouts.Retransmissions
		if len(to) != 1 || to[0].IntervalNs != int64(70*time.Millisecond)+1000 || to[0].Packet.PSN != p+3 ||
			to[0].Packet.Opcode != roce.RCReadRequest.String() {
			t.Fatalf("timeouts %+v", to)
		}
		if l := rep.Retransmission.Losses; len(l) != 1 || l[0].RecoveredBy != "timeout" {
			t.Fatalf("losses %+v", l)
		}
	})
}

// cnpTrace is Lumina §6.4 in miniature: connections from the given
// requester addresses to one responder each send a message whose second
// packet is CE-marked, 2 us apart, and again 1 ms later; answered lists,
// per round, the connections whose mark draws a CNP (10 us later).
func cnpTrace(t *testing.T, ips []string, answered [2][]int, interval time.Duration) *Report {
	tr := newTrace(t, intent.VerbWrite, len(ips), ips...)
	tr.m.ResponderNIC.MinTimeBetweenCNPs = int64(interval)
	for round := range 2 {
		for c := range ips {
			first := tr.ipsn(c) + uint32(4*round)
			tr.data(0+c, first, first, 0)
		}
		for c := range ips {
			first := tr.ipsn(c) + uint32(4*round)
			tr.data(c, first, first+1, ecn)
		}
		tr.after(10 * time.Microsecond)
		for _, c := range answered[round] {
			tr.cnp(c, true)
		}
		for c := range ips {
			first := tr.ipsn(c) + uint32(4*round)
			tr.resend(c, first, first+2, first+3, nil)
			tr.ack(c, first+3)
		}
		tr.after(time.Millisecond)
	}
	rep := tr.analyze()
	wantCompliant(t, rep)
	return rep
}

func TestCNPScope(t *testing.T) {
	three := []string{"10.0.0.11", "10.0.0.12", "10.0.0.13"}
	for _, tc := range []struct {
		name       string
		ips        []string
		answered   [2][]int
		interval   time.Duration
		consistent []string
	}{
		// ConnectX-6 Dx: one timer for the port, only QP1 answers.
		{"per-port", three, [2][]int{{0}, {0}}, 50 * time.Microsecond, []string{ScopePort}},
		{"per-port, interval unknown", three, [2][]int{{0}, {0}}, 0, []string{ScopePort}},
		// ConnectX-4 and 5: a timer per destination IP; two QPs share
		// 10.0.0.11, so only the first of them answers.
		{"per-dest-ip", []string{"10.0.0.11", "10.0.0.11", "10.0.0.12", "10.0.0.13"}, [2][]int{{0, 2, 3}, {0, 2, 3}},
			50 * time.Microsecond, []string{ScopeDestIP, ScopeIPPair}},
		{"per-qp", []string{"10.0.0.11", "10.0.0.11", "10.0.0.12"}, [2][]int{{0, 1, 2}, {0, 1, 2}},
			50 * time.Microsecond, []string{ScopeQP}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := cnpTrace(t, tc.ips, tc.answered, tc.interval)
			cn := rep.CNP
			if !slices.Equal(cn.Consistent, tc.consistent) {
				t.Fatalf("consistent scopes %v, want %v\n%+v", cn.Consistent, tc.consistent, cn.Scopes)
			}
			want := int64(2 * len(tc.answered[0]))
			if cn.CNPs != want || cn.CEAnswered != want || cn.CEMarked != int64(2*len(tc.ips)) || cn.Unexplained != 0 {
				t.Fatalf("counts %+v", cn)
			}
			if len(tc.consistent) == 1 && cn.Scope != tc.consistent[0] {
				t.Fatalf("scope %q", cn.Scope)
			}
			var perQP int64
			for _, q := range cn.ByQP {
				perQP += q.CNPs
				if q.Node != "responder" || q.CEMarked != 2 {
					t.Fatalf("by QP %+v", cn.ByQP)
				}
			}
			if perQP != want {
				t.Fatalf("by QP %+v", cn.ByQP)
			}
			for _, sc := range cn.Scopes {
				if sc.Scope == tc.consistent[0] {
					// The mark 1 ms later draws a CNP: the interval is
					// below 1 ms and above the 2 us between marks.
					if sc.UpperNs < int64(990*time.Microsecond) || sc.UpperNs > int64(1100*time.Microsecond) ||
						(sc.LowerNs >= 0 && sc.LowerNs > int64(10*time.Microsecond)) {
						t.Fatalf("bounds %+v", sc)
					}
				}
			}
		})
	}
	t.Run("same grouping with one requester IP", func(t *testing.T) {
		rep := cnpTrace(t, []string{"10.0.0.1", "10.0.0.1", "10.0.0.1"}, [2][]int{{0}, {0}}, 50*time.Microsecond)
		cn := rep.CNP
		if !slices.Equal(cn.Consistent, []string{ScopePort, ScopeDestIP, ScopeIPPair}) ||
			!strings.Contains(cn.Scope, "same grouping") {
			t.Fatalf("scope %q consistent %v", cn.Scope, cn.Consistent)
		}
		if pr := cn.ByIPPair; len(pr) != 1 || pr[0].Src != "10.0.1.1" || pr[0].Dst != "10.0.0.1" || pr[0].Count != 2 {
			t.Fatalf("by IP pair %+v", pr)
		}
	})
}

func TestNAKTriggersCNP(t *testing.T) {
	for _, with := range []bool{true, false} {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		if with {
			tr.cnp(0, true)
		}
		tr.nak(0, p+1)
		tr.resend(0, p, p+1, p+3, nil)
		tr.ack(0, p+3)
		rep := tr.analyze()
		cn := rep.CNP
		want := map[bool]string{true: "yes", false: "no"}[with]
		if cn.NAKTriggersCNP != want || cn.Gaps != 1 || cn.Unexplained != 0 || cn.NAKCNPs != map[bool]int64{true: 1}[with] {
			t.Fatalf("with a CNP %v: %+v", with, cn)
		}
	}
}

func TestCounters(t *testing.T) {
	tr, _ := writeDropNAK(t, biterr)
	tr.m.Requester = map[string]uint64{"packet_seq_err": 1, "local_ack_timeout_err": 1, "rp_cnp_ignored": 0}
	tr.m.Responder = map[string]uint64{"out_of_sequence": 1, "rx_icrc_encapsulated": 1, "np_cnp_sent": 0,
		"duplicate_request": 0}
	rep := tr.analyze()
	co := rep.Counters
	if co.Mismatches != 1 {
		t.Fatalf("mismatches %d: %+v", co.Mismatches, co.Checks)
	}
	got := map[string]CounterCheck{}
	for _, c := range co.Checks {
		got[c.Node+" "+c.Counter] = c
	}
	if c := got["requester local_ack_timeout_err"]; c.Match || c.Expected != 0 || c.Observed != 1 || !c.Present {
		t.Fatalf("timeout counter %+v", c)
	}
	for _, k := range []string{"requester packet_seq_err", "responder out_of_sequence", "responder rx_icrc_encapsulated",
		"requester rp_cnp_handled+rp_cnp_ignored"} {
		if c := got[k]; !c.Match {
			t.Fatalf("%s: %+v", k, c)
		}
	}
	if c := got["requester implied_nak_seq_err"]; c.Present || c.Match {
		t.Fatalf("absent counter checked: %+v", c)
	}
}

func TestMCT(t *testing.T) {
	tr := newTrace(t, intent.VerbWrite, 1)
	var q0 []int64
	for i := int64(100); i >= 1; i-- {
		q0 = append(q0, i*1000)
	}
	tr.m.MCT = [][]int64{q0, {5}}
	tr.msg(0, tr.ipsn(0), nil)
	rep := tr.analyze()
	want := Stats{Count: 100, MinNs: 1000, MedianNs: 50000, P99Ns: 99000, MaxNs: 100000, MeanNs: 50500}
	if rep.MCT.PerQP[0].Stats != want {
		t.Fatalf("QP 0: %+v", rep.MCT.PerQP[0].Stats)
	}
	if s := rep.MCT.PerQP[1].Stats; s.Count != 1 || s.P99Ns != 5 || s.MinNs != 5 {
		t.Fatalf("QP 1: %+v", s)
	}
	if o := rep.MCT.Overall; o.Count != 101 || o.MinNs != 5 || o.MaxNs != 100000 {
		t.Fatalf("overall %+v", o)
	}
	if !slices.Equal(tr.m.MCT[0][:2], []int64{100000, 99000}) {
		t.Fatal("the metadata's MCTs were reordered")
	}
}

// TestInvalid: a run that failed its integrity check is reported as
// invalid, every section too, and the text says so first.
func TestInvalid(t *testing.T) {
	tr, _ := writeDropNAK(t, drop)
	tr.m.Valid, tr.m.IntegrityNote = false, "mirror sequence gap at 17"
	rep := tr.analyze()
	if rep.Valid || !strings.Contains(rep.Invalid, "gap at 17") {
		t.Fatalf("report valid %v %q", rep.Valid, rep.Invalid)
	}
	v := reflect.ValueOf(*rep)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Struct {
			continue
		}
		if vf := f.FieldByName("Valid"); vf.IsValid() && vf.Bool() {
			t.Fatalf("section %s is valid", v.Type().Field(i).Name)
		}
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(strings.Join(lines[:4], "\n"), "INVALID TEST") || strings.Count(b.String(), "(NOT VALID)") != 6 {
		t.Fatalf("text:\n%s", b.String())
	}
}

// TestOddRecords: records that are not RoCE, not mirrored, or of other
// connections are counted and skipped.
func TestOddRecords(t *testing.T) {
	tr := newTrace(t, intent.VerbWrite, 1)
	p := tr.ipsn(0)
	tr.data(0, p, p, 0)
	tr.raw([]byte{1, 2, 3})
	tr.raw(make([]byte, 60))
	frame := append([]byte(nil), tr.frames[0].data...)
	frame[len(frame)-1] ^= 0xff // payload: still parses
	tr.raw(frame)
	other := newTrace(t, intent.VerbWrite, 1, "10.9.9.9")
	other.data(0, 1000, 1000, 0)
	tr.raw(other.frames[0].data)
	tr.data(0, p, p+1, 0)
	rep := tr.analyze()
	s := rep.Summary
	if s.Packets != 6 || s.RoCE != 4 || s.Unmatched != 1 || s.Malformed["truncated"]+s.Malformed["not-roce"] != 2 {
		t.Fatalf("summary %+v", s)
	}
	// The duplicate of PSN p is a retransmission the sender had no reason
	// for: a timeout that came too early is still a timeout.
	if rep.Connections[0].Duplicates != 1 {
		t.Fatalf("connection %+v", rep.Connections[0])
	}
}

// TestReportFiles: the report survives JSON and is written as the run
// directory's analysis.json and summary.txt.
func TestReportFiles(t *testing.T) {
	tr, _ := writeDropNAK(t, drop)
	dir := t.TempDir()
	tr.write(dir)
	if err := WriteMeta(dir, tr.m); err != nil {
		t.Fatal(err)
	}
	rep, err := AnalyzeDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Trace != filepath.Join(dir, TraceFile) {
		t.Fatalf("trace %q", rep.Trace)
	}
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(filepath.Join(dir, AnalysisFile))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(rep)
	b, _ := json.Marshal(back)
	if !bytes.Equal(a, b) {
		t.Fatalf("JSON round trip differs:\n%s\n%s", a, b)
	}
	txt, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil || !bytes.Contains(txt, []byte("NACK generation")) {
		t.Fatalf("summary: %v\n%s", err, txt)
	}
	if _, err := Analyze(context.Background(), filepath.Join(dir, "missing.pcap"), tr.m); err == nil {
		t.Fatal("missing trace analysed")
	}
	if _, err := Analyze(context.Background(), filepath.Join(dir, TraceFile), nil); err == nil {
		t.Fatal("analysed without metadata")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Analyze(ctx, filepath.Join(dir, TraceFile), tr.m); err == nil {
		t.Fatal("cancelled analysis succeeded")
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
