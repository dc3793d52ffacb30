//go:build !linux

package capture

import "os"

// rawFD: raw writes are Linux-only; elsewhere every file takes Go's path.
func rawFD(*os.File) int { return -1 }

func writeRaw(int, []byte) (int, error) { panic("capture: writeRaw off Linux") }
