package dtatranslator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// RunReporter is the reporter emulator (`appliance dta report`): it
// resolves the translator's MAC (5 s at most), sends cfg's reports from
// port and waits linger for the last NACKs, and returns the counters.
func RunReporter(ctx context.Context, cfg ReporterConfig, port dpdk.Port, pool *dpdk.Pool, linger time.Duration) (ReporterStats, error) {
	r, err := NewReporter(cfg, port, pool)
	if err != nil {
		return ReporterStats{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = r.Resolve(rctx)
	cancel()
	if err != nil {
		return ReporterStats{}, err
	}
	if err := r.Run(ctx, linger); err != nil {
		return ReporterStats{}, err
	}
	return r.Stats, nil
}

// ParseLists reads Append list ids, comma-separated, into c.Lists.
func (c *ReporterConfig) ParseLists(s string) error {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return fmt.Errorf("%q", f)
		}
		c.Lists = append(c.Lists, uint32(v))
	}
	return nil
}

// ParseMix reads primitive weights, keywrite=4,append=1,... (also
// key-write, keyincrement, key-increment, postcarder), into c.Mix.
func (c *ReporterConfig) ParseMix(s string) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return fmt.Errorf("%q: want primitive=weight", kv)
		}
		switch k {
		case "keywrite", "key-write":
			c.Mix.KeyWrite = n
		case "append":
			c.Mix.Append = n
		case "keyincrement", "key-increment":
			c.Mix.KeyIncrement = n
		case "postcarder":
			c.Mix.Postcarder = n
		default:
			return fmt.Errorf("%q: keywrite, append, keyincrement or postcarder", k)
		}
	}
	return nil
}

// ParseSketch reads ID:KIND:COLUMNSxROWS:REPORTERS (KIND count-min or
// hyperloglog) into c.Sketch and c.SketchID.
func (c *ReporterConfig) ParseSketch(s string) error {
	f := strings.Split(s, ":")
	if len(f) != 4 {
		return fmt.Errorf("%q: want ID:KIND:COLUMNSxROWS:REPORTERS", s)
	}
	id, err := strconv.ParseUint(f[0], 10, 16)
	if err != nil {
		return fmt.Errorf("id %q", f[0])
	}
	var reg dtamem.SketchRegion
	switch f[1] {
	case "count-min":
		reg.Kind = dtawire.SketchCountMin
	case "hyperloglog":
		reg.Kind = dtawire.SketchHyperLogLog
	default:
		return fmt.Errorf("kind %q: count-min or hyperloglog", f[1])
	}
	cs, rs, ok := strings.Cut(f[2], "x")
	cols, err1 := strconv.ParseUint(cs, 10, 32)
	r, err2 := strconv.Atoi(rs)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("geometry %q: COLUMNSxROWS", f[2])
	}
	n, err := strconv.Atoi(f[3])
	if err != nil {
		return fmt.Errorf("reporters %q", f[3])
	}
	reg.Columns, reg.Rows, reg.Reporters = uint32(cols), r, n
	if err := reg.Validate(); err != nil {
		return err
	}
	c.Sketch, c.SketchID = &reg, uint16(id)
	return nil
}
