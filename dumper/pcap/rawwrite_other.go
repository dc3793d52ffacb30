//go:build !linux

package pcap

import (
	"io"
	"os"
)

// DirectWriter is f: raw writes are Linux-only.
func DirectWriter(f *os.File) io.Writer { return f }
