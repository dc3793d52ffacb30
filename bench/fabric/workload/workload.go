// Package workload generates the traffic the fabric simulator carries, as
// pure data: flows (source and destination host, size, start time,
// priority) drawn from flow-size distributions with Poisson arrivals at a
// target load, incast bursts and all-to-all exchanges, and a CSV form of
// them that the simulator's scenarios and the ns-3 peer (bench/fabric/ns3)
// both read, so the two simulators carry exactly the same flows. Every
// generator is deterministic for its inputs and seed.
package workload

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Flow is one message stream from Src to Dst.
type Flow struct {
	ID       int
	Src, Dst int   // host node indices (topo.Graph)
	Size     int64 // bytes
	Start    int64 // ns
	Prio     uint8 // 802.1p priority the flow's data travels on
	// Rate (bits/s), when positive and below the line rate, is what a
	// flow already running at Start sends at: its sender's congestion
	// control resumes it there (bench/fabric, with DCQCN on) instead of
	// at line rate. Zero: a new flow, at line rate (RDMA's line-rate
	// start).
	Rate float64
}

// DefaultPrio is the priority the generators give flows: RoCEv2 data on the
// lossless class, as bench/fabric's PrioData.
const DefaultPrio = 3

// Poisson draws flows for every host in hosts as an independent Poisson
// process whose offered load is load times bw (the host link's rate in
// bit/s): flows arrive every cdf.Mean()*8/(load*bw) seconds on average,
// each to a destination chosen uniformly among the other hosts, with a
// size drawn from cdf, until duration (ns). This is HPCC's traffic_gen.py
// with a seeded generator. Flows come sorted by start time and numbered in
// that order. There are none when there are fewer than two hosts or
// nothing positive to offer.
func Poisson(hosts []int, bw float64, load float64, cdf *CDF, duration int64, seed uint64) []Flow {
	if len(hosts) < 2 || cdf == nil || !(bw > 0) || !(load > 0) || duration <= 0 ||
		math.IsInf(bw, 0) || math.IsInf(load, 0) {
		return nil
	}
	// Mean inter-arrival per host, ns. A distribution of empty flows
	// still carries a byte each (Sample's floor).
	gap := max(cdf.Mean(), 1) * 8 / (bw * load) * 1e9
	rng := rand.New(rand.NewPCG(seed, 0x776f726b6c6f6164)) // "workload"
	expect := int(float64(duration) / gap * float64(len(hosts)))
	flows := make([]Flow, 0, min(expect+expect/8+16, 1<<20))
	for i, src := range hosts {
		t := rng.ExpFloat64() * gap
		for t < float64(duration) {
			j := rng.IntN(len(hosts) - 1)
			if j >= i {
				j++ // uniform over the other hosts
			}
			flows = append(flows, Flow{Src: src, Dst: hosts[j], Size: cdf.Sample(rng), Start: int64(t), Prio: DefaultPrio})
			t += rng.ExpFloat64() * gap
		}
	}
	// Generated host by host; the stable sort keeps ties in host order.
	slices.SortStableFunc(flows, func(a, b Flow) int { return cmpInt64(a.Start, b.Start) })
	for i := range flows {
		flows[i].ID = i
	}
	return flows
}

// InProgress draws the flows still running at time 0 when Poisson's
// arrivals (same hosts, rate, load and sizes, drawn with another stream)
// have been going on for warmup ns: a trace that starts from an empty
// fabric carries, for its first flow lifetimes, only the flows born in
// it, and with a long-tailed distribution (flows of hundreds of
// megabytes take milliseconds) that is far below the load. The warm-up
// runs through a fluid model of the hosts' links: every flow running
// gets its max-min fair share of its sender's link and its receiver's
// (bw each, the fabric between them taken as non-blocking), until it has
// sent its size. The flows start at 0 with what they have left and the
// fair share they had (Flow.Rate), in the order they arrived, numbered
// from 0. There are none when Poisson would
// draw none or warmup is not positive.
func InProgress(hosts []int, bw, load float64, cdf *CDF, warmup int64, seed uint64) []Flow {
	if warmup <= 0 {
		return nil
	}
	arrivals := Poisson(hosts, bw, load, cdf, warmup, seed^0x7761726d7570) // "warmup"
	type running struct {
		f          Flow
		left, rate float64 // bytes, bytes/ns
	}
	var act []*running
	capacity := bw / 8e9 // bytes/ns
	// fair sets every running flow's max-min fair rate over the links
	// they use: the sender's uplink (2*host) and the receiver's downlink
	// (2*host+1).
	paths := [][]int{}
	fair := func() {
		paths = paths[:0]
		for _, r := range act {
			paths = append(paths, []int{2 * r.f.Src, 2*r.f.Dst + 1})
		}
		for i, rate := range MaxMin(paths, 2*(slices.Max(hosts)+1), capacity) {
			act[i].rate = rate
		}
	}
	var now float64
	next := 0
	for {
		fair()
		done, arrive := math.Inf(1), float64(warmup)
		for _, r := range act {
			done = min(done, now+r.left/r.rate)
		}
		if next < len(arrivals) {
			arrive = float64(arrivals[next].Start)
		}
		until := min(done, arrive)
		for _, r := range act {
			r.left -= r.rate * (until - now)
		}
		now = until
		if now >= float64(warmup) {
			break
		}
		if arrive <= done {
			f := arrivals[next]
			act = append(act, &running{f: f, left: float64(f.Size)})
			next++
		}
		// Finished flows leave (less than a byte left: rounding).
		act = slices.DeleteFunc(act, func(r *running) bool { return r.left < 1 })
	}
	// The rates at warmup, among the flows still running.
	act = slices.DeleteFunc(act, func(r *running) bool { return r.left < 1 })
	fair()
	flows := make([]Flow, 0, len(act))
	for _, r := range act {
		if r.left < 1 {
			continue
		}
		f := r.f
		// The flow resumes at the share it had: flows that all restarted
		// at line rate at 0 would make an incast of the trace's first
		// microseconds that no steady state has.
		f.ID, f.Start, f.Size, f.Rate = len(flows), 0, int64(math.Ceil(r.left)), r.rate*8e9
		flows = append(flows, f)
	}
	return flows
}

// MaxMin is the max-min fair rates of flows over paths of links numbered
// 0..nlinks-1, each of capacity c (progressive filling): the flows of the
// link whose fair share is the smallest get that share, their capacity
// leaves every link they cross, and so on until every flow has a rate.
// Ties go to the lowest-numbered link, so the rates do not depend on any
// map's order.
func MaxMin(paths [][]int, nlinks int, c float64) []float64 {
	left := make([]float64, nlinks)
	users := make([]int, nlinks)
	for i := range left {
		left[i] = c
	}
	for _, p := range paths {
		for _, l := range p {
			users[l]++
		}
	}
	rate := make([]float64, len(paths))
	fixed := make([]bool, len(paths))
	for {
		bottleneck, share := -1, math.Inf(1)
		for l, n := range users {
			if n > 0 && left[l]/float64(n) < share {
				bottleneck, share = l, left[l]/float64(n)
			}
		}
		if bottleneck < 0 {
			return rate
		}
		for i, p := range paths {
			if fixed[i] || !slices.Contains(p, bottleneck) {
				continue
			}
			fixed[i], rate[i] = true, share
			for _, l := range p {
				left[l] -= share
				users[l]--
			}
		}
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Incast makes bursts of N-to-1 traffic: every sender sends size bytes to
// dst at start, start+interval, ... (bursts times). A sender that is dst
// itself is skipped. Flows are ordered by burst, then sender.
func Incast(senders []int, dst int, size int64, bursts int, interval int64, start int64) []Flow {
	var flows []Flow
	for b := range max(bursts, 0) {
		for _, s := range senders {
			if s == dst {
				continue
			}
			flows = append(flows, Flow{ID: len(flows), Src: s, Dst: dst, Size: size, Start: start + int64(b)*interval, Prio: DefaultPrio})
		}
	}
	return flows
}

// AllToAll makes every host send size bytes to every other host at start:
// n*(n-1) flows, ordered by source, then destination.
func AllToAll(hosts []int, size int64, start int64) []Flow {
	flows := make([]Flow, 0, len(hosts)*max(len(hosts)-1, 0))
	for _, s := range hosts {
		for _, d := range hosts {
			if s != d {
				flows = append(flows, Flow{ID: len(flows), Src: s, Dst: d, Size: size, Start: start, Prio: DefaultPrio})
			}
		}
	}
	return flows
}

// Merge combines workloads (background Poisson traffic and incast bursts,
// say) into one, sorted by start time (ties keep the order given) and
// numbered afresh so IDs stay unique.
func Merge(sets ...[]Flow) []Flow {
	var out []Flow
	for _, s := range sets {
		out = append(out, s...)
	}
	slices.SortStableFunc(out, func(a, b Flow) int { return cmpInt64(a.Start, b.Start) })
	for i := range out {
		out[i].ID = i
	}
	return out
}

// csvHeader names WriteCSV's columns. ReadCSV finds columns by these names,
// so files may order them differently or leave out id and prio.
var csvHeader = []string{"id", "src", "dst", "size", "start_ns", "prio"}

// WriteCSV writes flows with a header line: id, src and dst (host node
// indices), size (bytes), start_ns, prio.
func WriteCSV(w io.Writer, flows []Flow) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	rec := make([]string, len(csvHeader))
	for _, f := range flows {
		rec[0] = strconv.Itoa(f.ID)
		rec[1] = strconv.Itoa(f.Src)
		rec[2] = strconv.Itoa(f.Dst)
		rec[3] = strconv.FormatInt(f.Size, 10)
		rec[4] = strconv.FormatInt(f.Start, 10)
		rec[5] = strconv.Itoa(int(f.Prio))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads flows as WriteCSV writes them. The header is required;
// src, dst, size and start_ns are too, while a missing id numbers flows in
// file order and a missing prio is DefaultPrio. Errors name the line.
func ReadCSV(r io.Reader) ([]Flow, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("workload: flow csv is empty (want a header line)")
	}
	if err != nil {
		return nil, fmt.Errorf("workload: flow csv: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if !slices.Contains(csvHeader, h) {
			return nil, fmt.Errorf("workload: flow csv line 1: unknown column %q (want %s)", h, strings.Join(csvHeader, ","))
		}
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("workload: flow csv line 1: column %q twice", h)
		}
		col[h] = i
	}
	for _, need := range []string{"src", "dst", "size", "start_ns"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("workload: flow csv line 1: no %s column", need)
		}
	}
	var flows []Flow
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return flows, nil
		}
		if err != nil {
			// A csv.ParseError names its line; FieldPos would panic on a
			// record that did not parse.
			return nil, fmt.Errorf("workload: flow csv: %w", err)
		}
		line, _ := cr.FieldPos(0)
		num := func(name string, lo, hi int64) (int64, error) {
			i, ok := col[name]
			if !ok {
				return -1, nil
			}
			v, err := strconv.ParseInt(strings.TrimSpace(rec[i]), 10, 64)
			if err != nil || v < lo || v > hi {
				return 0, fmt.Errorf("workload: flow csv line %d: %s %q: want an integer %d..%d", line, name, rec[i], lo, hi)
			}
			return v, nil
		}
		var vals [6]int64
		for i, name := range csvHeader {
			lo, hi := int64(0), int64(math.MaxInt64)
			switch name {
			case "src", "dst", "id":
				hi = math.MaxInt32
			case "size":
				lo = 1
			case "prio":
				hi = 7
			}
			if vals[i], err = num(name, lo, hi); err != nil {
				return nil, err
			}
		}
		f := Flow{ID: int(vals[0]), Src: int(vals[1]), Dst: int(vals[2]), Size: vals[3], Start: vals[4], Prio: uint8(vals[5])}
		if vals[0] < 0 {
			f.ID = len(flows)
		}
		if vals[5] < 0 {
			f.Prio = DefaultPrio
		}
		if f.Src == f.Dst {
			return nil, fmt.Errorf("workload: flow csv line %d: flow from host %d to itself", line, f.Src)
		}
		flows = append(flows, f)
	}
}
