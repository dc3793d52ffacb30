package fabric

import (
	"math/rand/v2"
	"testing"
)

// TestQueueOrderIgnoresPushOrder: events come out on (t, key) whatever
// order they went in, wheel and far heap alike, so partitions that hand
// each other events in any order handle them as the sequential run does.
func TestQueueOrderIgnoresPushOrder(t *testing.T) {
	var evs []event
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		// Few distinct times, many ties; some beyond the wheel's span.
		tm := int64(rng.IntN(40)) * 997
		if i%10 == 0 {
			tm += 3 * wheelSpan
		}
		evs = append(evs, event{t: tm, key: uint64(rng.IntN(50))<<entityBits | uint64(i), a: int32(i)})
	}
	drain := func(order []event) []int32 {
		var q eventQueue
		for _, e := range order {
			q.pushKeyed(e)
		}
		var got []int32
		for {
			e, ok := q.popUntil(1 << 62)
			if !ok {
				return got
			}
			got = append(got, e.a)
		}
	}
	want := drain(evs)
	if len(want) != len(evs) {
		t.Fatalf("%d of %d events came out", len(want), len(evs))
	}
	for i := 1; i < len(want); i++ {
		a, b := &evs[want[i-1]], &evs[want[i]]
		if !before(a, b) {
			t.Fatalf("out of order at %d: (%d, %x) then (%d, %x)", i, a.t, a.key, b.t, b.key)
		}
	}
	for range 3 {
		shuffled := append([]event(nil), evs...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := drain(shuffled)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("pushed in another order, event %d came out as %d, not %d", i, got[i], want[i])
			}
		}
	}
}
