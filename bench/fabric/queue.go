package fabric

// The event queue is a calendar queue (a timing wheel of sorted buckets)
// in front of a 4-ary heap. Nearly every event of a fabric lands within a
// link delay or a serialisation time of now, where a heap of a thousand
// pending events spent half the simulator's time in pop (a compare per
// child per level, each a branch the CPU cannot predict). The wheel
// holds the events of the next wheelSpan nanoseconds, bucket by bucket;
// later ones (retransmission timers, flow starts, samples) wait in the
// heap and move into the wheel as it turns. Both order events on
// (t, key), so the order events are handled in, and with it a run, is
// exactly what the heap alone gave. Keys are unique (engine.go), so the
// order is total and does not depend on the order of the pushes either:
// a partition that receives events from others in any order handles
// them as the sequential run does.

const (
	bucketShift = 4 // 16 ns buckets
	wheelBits   = 13
	wheelSize   = 1 << wheelBits
	wheelMask   = wheelSize - 1
	wheelSpan   = int64(wheelSize) << bucketShift // 131 us
)

// bucket holds one bucket's events sorted on (t, key), from head on.
type bucket struct {
	ev   []event
	head int
}

type eventQueue struct {
	wheel [wheelSize]bucket
	// base is the start of the bucket the earliest event may be in: every
	// wheel event lies in [base, base+wheelSpan), and every heap event at
	// or after base+wheelSpan.
	base    int64
	inWheel int
	far     farHeap
	// key points at the next key of the entity scheduling events
	// (engine.go): push takes it and moves it on.
	key *uint64
	// spare holds the arrays of emptied buckets: a few dozen buckets
	// hold events at any time, and reusing their arrays keeps a run's
	// memory to those instead of every bucket's high-water mark.
	spare [][]event
}

func before(a, b *event) bool { return a.t < b.t || (a.t == b.t && a.key < b.key) }

// len is the number of pending events.
func (q *eventQueue) len() int { return q.inWheel + len(q.far.h) }

// push adds e, which must not be earlier than the last event taken, with
// the next key of the entity scheduling it.
func (q *eventQueue) push(e event) {
	e.key = *q.key
	*q.key++
	// pushKeyed's body, not a call to it: push is every event's path.
	if e.t >= q.base+wheelSpan {
		q.far.push(e)
		return
	}
	q.insert(e)
}

// pushKeyed adds e with the key it has (an event moved from another
// queue).
func (q *eventQueue) pushKeyed(e event) {
	if e.t >= q.base+wheelSpan {
		q.far.push(e)
		return
	}
	q.insert(e)
}

// insert puts e into its bucket, keeping the bucket sorted. Events come
// mostly in order, so the walk from the back is short.
func (q *eventQueue) insert(e event) {
	b := &q.wheel[(e.t>>bucketShift)&wheelMask]
	switch {
	case b.ev == nil:
		if n := len(q.spare); n > 0 {
			b.ev, q.spare = q.spare[n-1], q.spare[:n-1]
		}
	case len(b.ev) == cap(b.ev) && b.head > 0:
		// Full with taken events in front: reuse their room.
		n := copy(b.ev, b.ev[b.head:])
		b.ev, b.head = b.ev[:n], 0
	}
	b.ev = append(b.ev, e)
	i := len(b.ev) - 1
	for i > b.head && before(&e, &b.ev[i-1]) {
		b.ev[i] = b.ev[i-1]
		i--
	}
	b.ev[i] = e
	q.inWheel++
}

// pull moves the heap's events that the wheel now covers into it.
func (q *eventQueue) pull() {
	end := q.base + wheelSpan
	for len(q.far.h) > 0 && q.far.h[0].t < end {
		q.insert(q.far.pop())
	}
}

// popUntil takes the earliest event if it is due at or before until.
// It leaves base at or before until's bucket, so events scheduled at a
// time the caller moves now to (until, at most) still fit the wheel.
func (q *eventQueue) popUntil(until int64) (event, bool) {
	for {
		if q.inWheel == 0 {
			if len(q.far.h) == 0 || q.far.h[0].t > until {
				return event{}, false
			}
			q.base = q.far.h[0].t &^ (1<<bucketShift - 1)
			q.pull()
		}
		b := &q.wheel[(q.base>>bucketShift)&wheelMask]
		if b.head < len(b.ev) {
			e := b.ev[b.head]
			if e.t > until {
				return event{}, false
			}
			b.head++
			if b.head == len(b.ev) {
				q.spare = append(q.spare, b.ev[:0])
				b.ev, b.head = nil, 0
			}
			q.inWheel--
			return e, true
		}
		// This bucket is empty: every event is in a later one.
		if q.base+1<<bucketShift > until {
			return event{}, false
		}
		q.base += 1 << bucketShift
		if len(q.far.h) > 0 && q.far.h[0].t < q.base+wheelSpan {
			q.pull()
		}
	}
}

// peek is the time of the earliest event, if there is one. Every wheel
// event lies at or after base, so the first bucket from base that holds
// one holds the earliest; the heap's events all come after the wheel's.
func (q *eventQueue) peek() (int64, bool) {
	if q.inWheel > 0 {
		for t := q.base; ; t += 1 << bucketShift {
			if b := &q.wheel[(t>>bucketShift)&wheelMask]; b.head < len(b.ev) {
				return b.ev[b.head].t, true
			}
		}
	}
	if len(q.far.h) > 0 {
		return q.far.h[0].t, true
	}
	return 0, false
}

// farHeap is a 4-ary min-heap on (t, key) for the events beyond the wheel.
type farHeap struct {
	h []event
}

func (q *farHeap) push(e event) {
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !before(&q.h[i], &q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *farHeap) pop() event {
	top := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h = q.h[:n]
	i := 0
	for {
		m := i
		c := 4*i + 1
		for k := c; k < c+4 && k < n; k++ {
			if before(&q.h[k], &q.h[m]) {
				m = k
			}
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}
