package capture

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawFD is f's descriptor when the capture may write it with a raw system
// call, -1 otherwise. Every write through Go's syscall path calls
// entersyscall, which wakes the runtime's sysmon thread from its deep sleep;
// sysmon then polls every 20 us for as long as a goroutine runs, so a
// capture that flushes while it works pays for a few thread wakeups per
// flush (measured: about three per kernel block, 20-30% of the capture's
// CPU at 0.5 Mpps). A raw write skips that. It is kept to files whose
// writes do not wait on a reader: regular files (the page cache) and
// character devices such as /dev/null. Pipes, sockets and terminals, which
// block while their reader is slow, keep the runtime's path, so a stalled
// `-w - | tshark` parks only the writer.
func rawFD(f *os.File) int {
	fi, err := f.Stat()
	if err != nil {
		return -1
	}
	m := fi.Mode()
	if !m.IsRegular() && (m&os.ModeCharDevice == 0 || m&os.ModeDevice == 0) {
		return -1
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if rc.Control(func(d uintptr) { fd = int(d) }) != nil {
		return -1
	}
	return fd
}

// writeRaw writes all of b to fd with raw write(2) calls.
func writeRaw(fd int, b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[done])), uintptr(len(b)-done))
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return done, os.NewSyscallError("write", e)
		case n == 0:
			return done, os.ErrClosed // never for a regular file or a device that takes everything
		}
		done += int(n)
	}
	return done, nil
}
