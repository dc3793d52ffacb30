package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a byte count: 1500, 64KB, 16MB, 1GB (powers of 1024,
// KiB and friends too).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	// NaN, Inf and counts past int64 would convert to a negative size.
	if err != nil || !(v >= 0) || v*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: a number of bytes (64KB, 16MB)", s)
	}
	return int64(v * float64(mult)), nil
}
