package dpdk

import "time"

var (
	wallBase = time.Now()
	monoBase = wallBase.UnixNano()
)

// Nanotime returns nanoseconds since the Unix epoch, advancing with the
// monotonic clock, so receive timestamps never go backwards when the wall
// clock is stepped during a capture.
func Nanotime() int64 { return monoBase + int64(time.Since(wallBase)) }
