package hostmesh

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// PGCount is a switch port's cumulative ingress discards of one priority
// group, as the switch reports them.
type PGCount struct {
	Port  string
	PG    int
	Drops uint64
}

// ParsePGDrops reads SONiC's `show priority-group drop counters` (the
// sonic-utilities pg-drop table): a title line, a header naming the
// columns Port, PG0, PG1..., a rule of dashes, then a row per port. A
// counter the platform does not support reads N/A and is left out. Rows
// that do not fit the header (a field missing, a count that is no number)
// are counted in malformed and dropped; the output is an error only
// without a header.
func ParsePGDrops(r io.Reader) (counts []PGCount, malformed int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pgs []int // column -> PG, from the header; nil before it
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0 || strings.Trim(f[0], "-") == "":
			continue
		case pgs == nil:
			if f[0] != "Port" || len(f) < 2 {
				continue // the title, or a line before the table
			}
			for _, h := range f[1:] {
				n, err := strconv.Atoi(strings.TrimPrefix(h, "PG"))
				if !strings.HasPrefix(h, "PG") || err != nil || n < 0 || n > 15 {
					return nil, 0, fmt.Errorf("hostmesh: pg drop table: header column %q is not PG0-PG15", h)
				}
				pgs = append(pgs, n)
			}
			continue
		}
		if len(f) != len(pgs)+1 {
			malformed++
			continue
		}
		row := make([]PGCount, 0, len(pgs))
		ok := true
		for i, v := range f[1:] {
			if v == "N/A" {
				continue
			}
			n, err := strconv.ParseUint(strings.ReplaceAll(v, ",", ""), 10, 64)
			if err != nil {
				ok = false
				break
			}
			row = append(row, PGCount{Port: f[0], PG: pgs[i], Drops: n})
		}
		if !ok {
			malformed++
			continue
		}
		counts = append(counts, row...)
	}
	if err := sc.Err(); err != nil {
		return counts, malformed, fmt.Errorf("hostmesh: pg drop table: %w", err)
	}
	if pgs == nil {
		return nil, malformed, errors.New("hostmesh: pg drop table: no header (Port PG0 PG1 ...)")
	}
	return counts, malformed, nil
}

// PGSwitch is a switch the poller reads: its name as the probes' traced
// paths name it, and how its PG drop table is read.
type PGSwitch struct {
	Name string
	Read func(ctx context.Context) ([]byte, error)
}

// CommandPG reads a PG drop table from a shell command's output, e.g.
// `ssh admin@rail0 show priority-group drop counters`.
func CommandPG(command string) func(ctx context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "sh", "-c", command).Output()
		if err != nil {
			return nil, fmt.Errorf("%q: %w", command, err)
		}
		return out, nil
	}
}

// PGPoller turns switches' cumulative PG drop counters of one priority
// group into the changes since the last reading, the analyzer's input
// (Batch.PGDrops). The first reading of a port is its baseline; a counter
// that went backwards was cleared (sonic-clear priority-group drop
// counters, a reboot): the reading counts from zero.
type PGPoller struct {
	PG       int
	Switches []PGSwitch
	// Counters: readings that failed, rows dropped as malformed.
	Failures, Malformed uint64
	last                map[[2]string]pgReading
}

// Poll reads every switch at now (ns of the poller's clock, the hosts'
// synchronized wall clock) and returns the ports whose lossless group
// discarded since the last poll. A switch that cannot be read is skipped,
// its error joined to the returned one; the others' records stand.
func (p *PGPoller) Poll(ctx context.Context, now int64) ([]hostmeshanalyzer.PGDrop, error) {
	var out []hostmeshanalyzer.PGDrop
	var errs []error
	for _, sw := range p.Switches {
		b, err := sw.Read(ctx)
		if err != nil {
			p.Failures++
			errs = append(errs, fmt.Errorf("switch %s: %w", sw.Name, err))
			continue
		}
		counts, bad, err := ParsePGDrops(bytes.NewReader(b))
		p.Malformed += uint64(bad)
		if err != nil {
			p.Failures++
			errs = append(errs, fmt.Errorf("switch %s: %w", sw.Name, err))
			continue
		}
		out = p.Changes(out, sw.Name, counts, now)
	}
	return out, errors.Join(errs...)
}

// Changes appends to out the changes of a switch's counters of the
// poller's group read at now.
func (p *PGPoller) Changes(out []hostmeshanalyzer.PGDrop, sw string, counts []PGCount, now int64) []hostmeshanalyzer.PGDrop {
	if p.last == nil {
		p.last = map[[2]string]pgReading{}
	}
	for _, c := range counts {
		if c.PG != p.PG {
			continue
		}
		k := [2]string{sw, c.Port}
		last, ok := p.last[k]
		p.last[k] = pgReading{now, c.Drops}
		if !ok || now <= last.at {
			continue
		}
		d := c.Drops - last.n
		if c.Drops < last.n {
			d = c.Drops
		}
		if d > 0 {
			out = append(out, hostmeshanalyzer.PGDrop{Switch: sw, Port: c.Port, PG: p.PG, From: last.at, To: now, Discards: d})
		}
	}
	return out
}

// pgReading is a port's counter at its last reading, and when.
type pgReading struct {
	at int64
	n  uint64
}

// PGPollOptions drive RunPGPoller.
type PGPollOptions struct {
	Poller PGPoller
	// Name is the poller's Host in its batches.
	Name     string
	Every    time.Duration
	Duration time.Duration // 0: until ctx ends
	Up       *Uploader
	Log      *slog.Logger
	// Now is the clock (time.Now in ns by default).
	Now func() int64
}

// RunPGPoller polls every Every and pushes the changes to the analyzer
// (and/or the uploader's file) until ctx ends or Duration passes. Failed
// readings and deliveries are logged and retried at the next poll.
func RunPGPoller(ctx context.Context, o PGPollOptions) error {
	if o.Every <= 0 {
		return fmt.Errorf("hostmesh: pg drop poller: interval %v", o.Every)
	}
	if o.Now == nil {
		o.Now = func() int64 { return time.Now().UnixNano() }
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	t := time.NewTicker(o.Every)
	defer t.Stop()
	for {
		recs, err := o.Poller.Poll(ctx, o.Now())
		if err != nil && ctx.Err() == nil {
			o.Log.Warn("pg drop poll", "err", err)
		}
		if len(recs) > 0 {
			if err := o.Up.Push(ctx, hostmeshanalyzer.Batch{Host: o.Name, PGDrops: recs}); err != nil && ctx.Err() == nil {
				o.Log.Warn("pg drop upload", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
