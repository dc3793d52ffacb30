package pcap

import (
	"errors"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DirectWriter is f, written with raw write(2) calls where that is safe.
// Every write through Go's syscall path calls entersyscall, which wakes the
// runtime's sysmon thread from its deep sleep; sysmon then polls every
// 20 us for as long as a goroutine runs, so a capture that flushes while
// it works pays for a few thread wakeups per flush (measured: about three
// per kernel block, 20-30% of `appliance capture`'s CPU at 0.5 Mpps). A
// raw write skips that. It is kept to files whose writes do not wait on a
// reader: regular files (the page cache) and character devices such as
// /dev/null. Pipes, sockets and terminals, which block while their reader
// is slow, keep the runtime's path (f itself), so a stalled `-w - | tshark`
// parks only the writer.
func DirectWriter(f *os.File) io.Writer {
	if fd := rawFD(f); fd >= 0 {
		return rawFile{f: f, fd: fd}
	}
	return f
}

// rawFile writes f through its descriptor; f keeps the descriptor open.
type rawFile struct {
	f  *os.File
	fd int
}

func (r rawFile) Write(b []byte) (int, error) { return writeRaw(r.fd, b) }

// rawFD is f's descriptor when it may be written with raw system calls,
// -1 otherwise.
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

// directAlign is the alignment of a direct write's buffer, length and file
// offset: a page, which covers every logical block size (512 or 4096).
const directAlign = 4096

// createDirect creates (truncating) path for O_DIRECT writes; where the
// filesystem refuses O_DIRECT it creates it normally and says so.
func createDirect(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_DIRECT, 0o666)
	if err == nil {
		return f, true, nil
	}
	if errors.Is(err, unix.EINVAL) {
		f, err = os.Create(path)
		return f, false, err
	}
	return nil, false, err
}

// clearDirect turns O_DIRECT off on f, so that a partial block can be
// written.
func clearDirect(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err == nil {
			_, err = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_DIRECT)
		}
		ferr = err
	}); err != nil {
		return err
	}
	return ferr
}
