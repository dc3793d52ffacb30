//go:build !linux

package pcap

import (
	"io"
	"os"
)

// DirectWriter is f: raw writes are Linux-only.
func DirectWriter(f *os.File) io.Writer { return f }

const directAlign = 4096

// createDirect creates path for normal writes: direct I/O is Linux-only.
func createDirect(path string) (*os.File, bool, error) {
	f, err := os.Create(path)
	return f, false, err
}

func clearDirect(*os.File) error { return nil }
