package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Hugepage sizes the appliance uses, in KiB as sysfs names them.
const (
	Size2M = 2048
	Size1G = 1048576
)

// ParseSize reads a huge page size: "2M", "1G", "2048kB" (sysfs's spelling)
// or a byte count with K/M/G suffix. It returns KiB.
func ParseSize(s string) (int, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := 1
	switch {
	case strings.HasSuffix(t, "K"):
		t = t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		t, mult = t[:len(t)-1], 1024
	case strings.HasSuffix(t, "G"):
		t, mult = t[:len(t)-1], 1024*1024
	default:
		return 0, fmt.Errorf("huge page size %q: want 2M or 1G", s)
	}
	v, err := strconv.Atoi(t)
	if err != nil || v <= 0 || v > math.MaxInt/mult {
		return 0, fmt.Errorf("huge page size %q: want 2M or 1G", s)
	}
	return v * mult, nil
}

// SizeName spells a size in KiB the way operators say it: "2 MiB", "1 GiB".
func SizeName(kB int) string {
	switch {
	case kB >= 1<<20 && kB%(1<<20) == 0:
		return fmt.Sprintf("%d GiB", kB>>20)
	case kB >= 1<<10 && kB%(1<<10) == 0:
		return fmt.Sprintf("%d MiB", kB>>10)
	}
	return fmt.Sprintf("%d KiB", kB)
}

// HugepageSize is the reservation of one page size.
type HugepageSize struct {
	SizeKB int         `json:"size_kb"`
	Total  int         `json:"total"`
	Free   int         `json:"free"`
	Nodes  map[int]int `json:"nodes,omitempty"` // NUMA node -> pages reserved there
}

// Hugepages lists the page sizes the kernel offers, smallest first, with
// what is reserved globally and per NUMA node.
func (h *Host) Hugepages() []HugepageSize {
	var out []HugepageSize
	for _, name := range dirNames(h.sys("kernel/mm/hugepages")) {
		kB, ok := sizeFromDir(name)
		if !ok {
			continue
		}
		hs := HugepageSize{SizeKB: kB, Nodes: map[int]int{}}
		hs.Total, _ = readInt(h.sys("kernel/mm/hugepages", name, "nr_hugepages"))
		hs.Free, _ = readInt(h.sys("kernel/mm/hugepages", name, "free_hugepages"))
		for _, node := range h.nodes() {
			if n, ok := readInt(h.sys("devices/system/node", fmt.Sprintf("node%d", node), "hugepages", name, "nr_hugepages")); ok {
				hs.Nodes[node] = n
			}
		}
		out = append(out, hs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SizeKB < out[j].SizeKB })
	return out
}

func sizeFromDir(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "hugepages-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "kB")
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	return v, err == nil && v > 0
}

// nodes lists the NUMA nodes sysfs shows.
func (h *Host) nodes() []int {
	var out []int
	for _, name := range dirNames(h.sys("devices/system/node")) {
		if s, ok := strings.CutPrefix(name, "node"); ok {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	sort.Ints(out)
	return out
}

// meminfo reads /proc/meminfo's fields as numbers (kB fields in kB).
func (h *Host) meminfo() map[string]int {
	f, err := os.Open(h.proc("meminfo"))
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		if n, err := strconv.Atoi(fs[0]); err == nil {
			out[k] = n
		}
	}
	return out
}

// hugetlbfsMounts lists where hugetlbfs is mounted: DPDK maps its pages from
// there, so reserved pages without a mount are of no use to it.
func (h *Host) hugetlbfsMounts() []string {
	b, err := os.ReadFile(h.proc("mounts"))
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 3 && fs[2] == "hugetlbfs" {
			out = append(out, fs[1])
		}
	}
	return out
}

// CheckHugepages fails when no huge page of any size is reserved: DPDK's
// packet pools and the DTA collector's registered memory live on them (the
// collector falls back to small pages, at a TLB-miss cost per report).
func (h *Host) CheckHugepages(_ context.Context) Result {
	var r Result
	r.set(OK)
	sizes := h.Hugepages()
	if len(sizes) == 0 {
		r.set(Fail)
		r.detail("%s lists no huge page sizes: the kernel lacks hugetlbfs support", h.sys("kernel/mm/hugepages"))
		r.fix("use a kernel built with CONFIG_HUGETLBFS (every distribution kernel is)")
		return r
	}
	totalKB := 0
	for _, s := range sizes {
		line := fmt.Sprintf("%s pages: %d reserved, %d free", SizeName(s.SizeKB), s.Total, s.Free)
		if len(s.Nodes) > 1 {
			var per []string
			for _, n := range h.nodes() {
				per = append(per, fmt.Sprintf("node%d %d", n, s.Nodes[n]))
			}
			line += " (" + strings.Join(per, ", ") + ")"
		}
		r.detail("%s", line)
		totalKB += s.Total * s.SizeKB
		if s.Total > 0 && s.Free == 0 {
			r.set(Warn)
			r.detail("every %s page is in use: a new service will not get any", SizeName(s.SizeKB))
			r.fix("reserve more: appliance setup hugepages %d --size %s", s.Total*2, shortSize(s.SizeKB))
		}
	}
	if mi := h.meminfo(); mi != nil {
		r.detail("/proc/meminfo: HugePages_Total %d, HugePages_Free %d, Hugepagesize %d kB, Hugetlb %d kB",
			mi["HugePages_Total"], mi["HugePages_Free"], mi["Hugepagesize"], mi["Hugetlb"])
		if totalKB == 0 && mi["Hugetlb"] > 0 { // pages of a size sysfs did not list
			totalKB = mi["Hugetlb"]
		}
	}
	if totalKB == 0 {
		r.set(Fail)
		r.detail("no huge pages reserved: DPDK ports cannot start, the DTA collector falls back to small pages")
		r.fix("appliance setup hugepages 1024 --size 2M   (2 GiB of 2 MiB pages; add --node N per NUMA node of a NIC)")
		if h.hasSize(Size1G) {
			r.fix("or 1 GiB pages, best reserved at boot: hugepagesz=1G hugepages=4 on the kernel command line")
		}
		return r
	}
	r.detail("%s reserved in all", SizeName(totalKB))
	if mounts := h.hugetlbfsMounts(); len(mounts) == 0 {
		r.set(Warn)
		r.detail("hugetlbfs is not mounted: DPDK maps its pages from a hugetlbfs mount")
		r.fix("mount -t hugetlbfs nodev /dev/hugepages (systemd's dev-hugepages.mount does it at boot)")
	} else {
		r.detail("hugetlbfs mounted at %s", strings.Join(mounts, ", "))
	}
	return r
}

func (h *Host) hasSize(kB int) bool {
	for _, s := range h.Hugepages() {
		if s.SizeKB == kB {
			return true
		}
	}
	return false
}

func shortSize(kB int) string {
	switch kB {
	case Size2M:
		return "2M"
	case Size1G:
		return "1G"
	}
	return fmt.Sprintf("%dkB", kB)
}

// HugepageSetting is what SetHugepages did or would do.
type HugepageSetting struct {
	Path   string `json:"path"`
	SizeKB int    `json:"size_kb"`
	Node   int    `json:"node"` // -1: the global pool, the kernel spreads pages over nodes
	Before int    `json:"before"`
	Asked  int    `json:"asked"`
	Got    int    `json:"got"` // read back after the write; Before on a dry run
	DryRun bool   `json:"dry_run"`
}

// ErrShort is returned (wrapped) when the kernel reserved fewer pages than
// asked: memory is too fragmented for pages of that size.
var ErrShort = errors.New("the kernel reserved fewer huge pages than asked")

// HugepagesPath is the nr_hugepages file of a size, globally (node < 0) or
// on one NUMA node.
func (h *Host) HugepagesPath(kB, node int) string {
	dir := fmt.Sprintf("hugepages-%dkB", kB)
	if node < 0 {
		return h.sys("kernel/mm/hugepages", dir, "nr_hugepages")
	}
	return h.sys("devices/system/node", fmt.Sprintf("node%d", node), "hugepages", dir, "nr_hugepages")
}

// SetHugepages sets the number of reserved pages of a size (KiB), globally
// or on one node, reads the number back and reports it. The kernel grants
// what it can: a shortfall returns the setting and an error wrapping
// ErrShort. On a dry run nothing is written.
func (h *Host) SetHugepages(n, kB, node int, dryRun bool) (HugepageSetting, error) {
	st := HugepageSetting{Path: h.HugepagesPath(kB, node), SizeKB: kB, Node: node, Asked: n, DryRun: dryRun}
	if n < 0 {
		return st, fmt.Errorf("huge pages: %d is not a page count", n)
	}
	if !h.hasSize(kB) {
		var have []string
		for _, s := range h.Hugepages() {
			have = append(have, shortSize(s.SizeKB))
		}
		return st, fmt.Errorf("this kernel offers no %s huge pages (it offers: %s)", SizeName(kB), orNone(have))
	}
	before, ok := readInt(st.Path)
	if !ok {
		if node >= 0 {
			return st, fmt.Errorf("NUMA node %d has no %s: nodes here: %v", node, st.Path, h.nodes())
		}
		return st, fmt.Errorf("cannot read %s", st.Path)
	}
	st.Before, st.Got = before, before
	if dryRun {
		return st, nil
	}
	if err := os.WriteFile(st.Path, []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return st, fmt.Errorf("writing %s needs root: %w", st.Path, err)
		}
		return st, fmt.Errorf("writing %s: %w", st.Path, err)
	}
	got, ok := readInt(st.Path)
	if !ok {
		return st, fmt.Errorf("reading back %s failed", st.Path)
	}
	st.Got = got
	if got < n {
		how := "free memory (echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory) and retry"
		if kB >= Size1G {
			how = fmt.Sprintf("reserve them at boot: hugepagesz=1G hugepages=%d on the kernel command line", n)
		}
		return st, fmt.Errorf("%w: %d of %d %s pages: memory is fragmented; %s", ErrShort, got, n, SizeName(kB), how)
	}
	return st, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
