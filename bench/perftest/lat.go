package perftest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
)

// LatStats are perftest's latency columns, in microseconds.
type LatStats struct {
	Min     float64 `json:"t_min"`
	Max     float64 `json:"t_max"`
	Typical float64 `json:"t_typical"` // the median
	Avg     float64 `json:"t_avg"`
	Stdev   float64 `json:"t_stdev"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p99_9"`
}

// latStats summarises samples in nanoseconds (div halves round trips); it
// sorts samples in place.
func latStats(samples []int64, div float64) *LatStats {
	if len(samples) == 0 {
		return &LatStats{}
	}
	slices.Sort(samples)
	us := func(v int64) float64 { return float64(v) / div / 1e3 }
	pct := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(samples)))) - 1
		return us(samples[min(max(i, 0), len(samples)-1)])
	}
	var sum float64
	for _, v := range samples {
		sum += us(v)
	}
	avg := sum / float64(len(samples))
	var sq float64
	for _, v := range samples {
		d := us(v) - avg
		sq += d * d
	}
	return &LatStats{Min: us(samples[0]), Max: us(samples[len(samples)-1]), Typical: us(samples[len(samples)/2]),
		Avg: avg, Stdev: math.Sqrt(sq / float64(len(samples))), P99: pct(0.99), P999: pct(0.999)}
}

// request measures READ or atomic latency: one request at a time, from post
// to its completion.
func (s *side) request(size int, r *Result) error {
	e := s.e
	wr := s.sendWR(0, size)
	wr.Flags |= verbs.SendSignaled
	qp := e.qps[0]
	i := 0
	w := s.newWaiter(func() string { return fmt.Sprintf("request %d of %d outstanding", i+1, s.p.Iters) })
	for ; i < s.p.Iters; i++ {
		wr.ID = uint64(i)
		t0 := dpdk.Nanotime()
		if err := qp.PostSend(s.wrs[:1]); err != nil {
			return fmt.Errorf("perftest: QP %#x post: %w", qp.QPN(), err)
		}
		for {
			k, err := e.scq.Poll(s.wcs[:1])
			if err != nil {
				return err
			}
			if k == 1 {
				now := dpdk.Nanotime()
				if s.wcs[0].Status != verbs.WCSuccess {
					return wcError(qp.QPN(), &s.wcs[0])
				}
				s.lat[i] = now - t0
				w.progress(now)
				break
			}
			if err := w.idle(); err != nil {
				return err
			}
		}
	}
	r.Lat = latStats(s.lat[:s.p.Iters], 1)
	return nil
}

// pingPong measures WRITE or SEND latency: the client sends, the server
// answers each message when it sees it, and a sample is half the client's
// round trip. WRITE without immediate sees a message arrive by polling the
// last byte of its buffer, which the peer sets to the iteration's tag (as
// ib_write_lat does); the others take a receive completion.
func (s *side) pingPong(size int, r *Result) error {
	e, p := s.e, s.p
	qp := e.qps[0]
	wr := s.sendWR(0, size)
	wr.Flags |= verbs.SendSignaled
	sendBuf := e.buf[e.region(0) : e.region(0)+size]
	poll := (*uint32)(unsafe.Pointer(&e.buf[(e.region(0)+e.slot+size-1)&^3]))
	shift := uint((e.region(0)+e.slot+size-1)&3) * 8
	memPoll := p.Verb == Write && !p.WriteImm
	rposted := min(p.RxDepth, p.Iters)
	outstanding := 0
	i := 0
	w := s.newWaiter(func() string {
		return fmt.Sprintf("message %d of %d not answered (%d sends outstanding)", i+1, p.Iters, outstanding)
	})
	// reap takes send completions off the CQ; ping-pong sends are all
	// signalled so the send queue never fills with finished requests.
	reap := func() error {
		k, err := e.scq.Poll(s.wcs)
		for j := range s.wcs[:k] {
			if s.wcs[j].Status != verbs.WCSuccess {
				return wcError(qp.QPN(), &s.wcs[j])
			}
		}
		outstanding -= k
		return err
	}
	send := func(tag byte) error {
		sendBuf[size-1] = tag
		wr.ID = uint64(tag)
		for {
			err := qp.PostSend(s.wrs[:1])
			if err == nil {
				outstanding++
				return nil
			}
			if !errors.Is(err, verbs.ErrQueueFull) {
				return fmt.Errorf("perftest: QP %#x post: %w", qp.QPN(), err)
			}
			if err := reap(); err != nil {
				return err
			}
			if err := w.idle(); err != nil {
				return err
			}
		}
	}
	// arrived waits for message i from the peer.
	arrived := func(tag byte) error {
		for {
			if memPoll {
				if byte(atomic.LoadUint32(poll)>>shift) == tag {
					return nil
				}
			} else {
				k, err := e.rcq.Poll(s.wcs[:1])
				if err != nil {
					return err
				}
				if k == 1 {
					wc := &s.wcs[0]
					if wc.Status != verbs.WCSuccess {
						bad := *wc // reap polls into the same array
						if bad.Status == verbs.WCWRFlushErr {
							// A flushed receive is the QP's error, not its
							// cause: the send queue holds that completion.
							if err := reap(); err != nil {
								return err
							}
						}
						return wcError(qp.QPN(), &bad)
					}
					if int(wc.ByteLen) != size {
						return fmt.Errorf("perftest: QP %#x received %d bytes, expected %d", qp.QPN(), wc.ByteLen, size)
					}
					if rposted < p.Iters {
						if err := qp.PostRecv(s.rwrs[:1]); err != nil {
							return fmt.Errorf("perftest: QP %#x post receive: %w", qp.QPN(), err)
						}
						rposted++
					}
					return nil
				}
			}
			if err := reap(); err != nil {
				return err
			}
			if err := w.idle(); err != nil {
				return err
			}
		}
	}
	var tsent int64
	for ; i < p.Iters; i++ {
		// Tags run 1..255 so consecutive messages differ from each other
		// and from the zeroed buffer.
		tag := byte(i%255 + 1)
		if s.client {
			t0 := dpdk.Nanotime()
			if err := send(tag); err != nil {
				return err
			}
			if err := arrived(tag); err != nil {
				return err
			}
			now := dpdk.Nanotime()
			s.lat[i] = now - t0
			w.progress(now)
		} else {
			if err := arrived(tag); err != nil {
				return err
			}
			now := dpdk.Nanotime()
			if i > 0 {
				// The server's sample is its own round trip: from its
				// answer to the client's next message.
				s.lat[i-1] = now - tsent
			}
			w.progress(now)
			tsent = dpdk.Nanotime()
			if err := send(tag); err != nil {
				return err
			}
		}
	}
	for outstanding > 0 {
		if err := reap(); err != nil {
			return err
		}
		if outstanding > 0 {
			if err := w.idle(); err != nil {
				return err
			}
		}
	}
	n := p.Iters
	if !s.client {
		n--
	}
	r.Lat = latStats(s.lat[:n], 2)
	r.Iters = n
	return nil
}
