package hugemem

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestMapUnmap(t *testing.T) {
	for _, huge := range []bool{false, true} {
		b, got, err := Map(3<<20+5, huge)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 3<<20+5 || (!huge && got) {
			t.Fatalf("len %d huge %v", len(b), got)
		}
		b[len(b)-1] = 7
		if err := Unmap(b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdvise: the whole huge pages inside an advised range are backed by
// transparent huge pages once touched, where the kernel has them for
// madvise'd memory (its enabled setting is always or madvise).
func TestAdvise(t *testing.T) {
	if err := Advise(make([]byte, 100)); err != nil { // no whole huge page: nothing to ask
		t.Fatal(err)
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("no transparent huge pages here (%q, %v)", mode, err)
	}
	const size = 8 << 20
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	if err := Advise(b[1:]); err != nil {
		t.Fatal(err)
	}
	fallback0 := thpFallbacks(t)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	start := uint64(uintptr(unsafe.Pointer(&b[0])))
	huge := anonHugeKiB(t, start, start+size)
	// b[1:] holds 3 whole huge pages wherever the mapping starts.
	if huge < 3*HugePageSize/1024 {
		if thpFallbacks(t) > fallback0 {
			t.Skipf("the kernel fell back to 4 KiB pages (no free huge page): %d KiB huge", huge)
		}
		t.Fatalf("%d KiB of the advised range on huge pages, want at least %d", huge, 3*HugePageSize/1024)
	}
}

// anonHugeKiB sums the AnonHugePages of the mappings that overlap [lo, hi),
// from /proc/self/smaps (madvise splits a mapping where the advice starts
// and ends).
func anonHugeKiB(t *testing.T, lo, hi uint64) int {
	f, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	in, sum := false, 0
	for _, l := range strings.Split(string(f), "\n") {
		fields := strings.Fields(l)
		if len(fields) == 0 {
			continue
		}
		if from, to, ok := strings.Cut(fields[0], "-"); ok && len(fields) >= 5 {
			a, err1 := strconv.ParseUint(from, 16, 64)
			z, err2 := strconv.ParseUint(to, 16, 64)
			in = err1 == nil && err2 == nil && a < hi && z > lo
			continue
		}
		if in && fields[0] == "AnonHugePages:" && len(fields) >= 2 {
			n, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatal(err)
			}
			sum += n
		}
	}
	return sum
}

// thpFallbacks is the kernel's count of faults that wanted a transparent
// huge page and got a small one.
func thpFallbacks(t *testing.T) uint64 {
	f, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(f), "\n") {
		if v, ok := strings.CutPrefix(l, "thp_fault_fallback "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}
