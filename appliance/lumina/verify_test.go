package lumina

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// TestIntentThatCannotFire: {qpn: 0, psn: 2, type: drop, iter: 9} asks for
// a ninth round that a clean connection never reaches. The injector has
// nothing to report and used to pass the run as "traffic ok, go-back-N
// ok"; the trace shows the intent never fired, and the run fails saying
// so. The intent beside it fires once, on the first of the connection's
// two messages: an intent names one packet, as Lumina's controller keys it.
func TestIntentThatCannotFire(t *testing.T) {
	tb, err := NewTestbed(TestbedConfig{Name: fmt.Sprintf("nofire%d", os.Getpid()), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	p := writeParams
	p.NumQPs = 2
	never := intent.Intent{QP: 0, PSN: 2, Iter: 9, Type: mirror.EventDrop}
	ecn := intent.Intent{QP: 1, PSN: 1, Iter: 1, Type: mirror.EventECN}
	run, err := tb.RunEvents(context.Background(), p, []intent.Intent{never, ecn}, tb.Path("merged.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if !run.Traffic.OK() || run.IntegrityErr != nil {
		t.Fatalf("traffic %+v, integrity %v", run.Traffic.QPs, run.IntegrityErr)
	}
	ev := run.Events
	if run.Pass() || !slices.Equal(ev.NotFired(), []intent.Intent{never}) {
		t.Fatalf("passed %v, not fired %v, problems %v", run.Pass(), ev.NotFired(), ev.Problems)
	}
	want := "intent 0 {qpn 0 psn 2 iter 9 drop} never fired"
	if len(ev.Problems) != 1 || !strings.HasPrefix(ev.Problems[0], want) {
		t.Fatalf("problems %q, want one starting %q", ev.Problems, want)
	}
	if ic := ev.Intents[1]; ic.Fired != 1 || ic.Entries != 1 || ic.Problem != "" || ev.Marked["ecn"] != 1 {
		t.Fatalf("ecn intent %+v (%d marks): want fired once, in the first message only", ic, ev.Marked["ecn"])
	}
}

// TestEventsNotFromHits: the check reads the trace, not the injector's
// counters. Verified against entries one PSN off what was loaded, the same
// trace shows a mark no intent asked for and a position that passed
// unmarked; verified against the loaded entries with the hit counters
// zeroed, it passes.
func TestEventsNotFromHits(t *testing.T) {
	tb, err := NewTestbed(TestbedConfig{Name: fmt.Sprintf("hits%d", os.Getpid()), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	p := writeParams
	p.NumQPs, p.MsgsPerQP = 1, 1
	in := []intent.Intent{{QP: 0, PSN: 2, Iter: 1, Type: mirror.EventDrop}}
	merged := tb.Path("merged.pcap")
	run, err := tb.RunEvents(context.Background(), p, in, merged)
	if err != nil || !run.Pass() {
		t.Fatalf("%v %+v", err, run.Events)
	}
	g := intent.Geometry{Verb: p.Verb, MessageSize: p.MessageSize, MTU: p.MTU, NumMessages: p.MsgsPerQP}
	v := Verify{Mode: intent.IterPaper, Conns: run.Traffic.Conns(), Geometry: g}
	for i := range run.Hits {
		run.Hits[i] = 0
	}
	ec, err := checkEvents(merged, run.Entries, in, v, 0)
	if err != nil || len(ec.Problems) != 0 || ec.Intents[0].Fired != 1 {
		t.Fatalf("same entries, no hits: %v %+v", err, ec)
	}
	off := slices.Clone(run.Entries)
	off[0].Key.PSN++
	ec, err = checkEvents(merged, off, in, v, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(ec.Problems, "\n")
	for _, w := range []string{"carries drop, which no intent asked for", "the packet carries none", "intent 0 {qpn 0 psn 2 iter 1 drop} never fired"} {
		if !strings.Contains(got, w) {
			t.Errorf("problems %q: want %q", got, w)
		}
	}
}
