//go:build !unix

package fabric

import "time"

// processCPU is not available here; CPU-time metrics then read as 0.
func processCPU() time.Duration { return 0 }
