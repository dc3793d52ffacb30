package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/appliance/host"
	"github.com/rdma-appliance/appliance/dpdk/sysfs"
)

// fakeHost points doctor and setup at a fake sysfs/procfs tree with the
// given files (paths relative to the tree's root, "sys/..." or "proc/...").
func fakeHost(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, s := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oldRoot, oldNew := sysfs.Root, newHost
	sysfs.Root = filepath.Join(root, "sys")
	newHost = func() *host.Host {
		return &host.Host{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc"),
			LookPath: func(string) (string, error) { return "", exec.ErrNotFound },
			Run: func(context.Context, string, ...string) ([]byte, error) {
				return nil, errors.New("no tools in the fake host")
			}}
	}
	t.Cleanup(func() { sysfs.Root, newHost = oldRoot, oldNew })
	return root
}

// bareHost is this machine's situation: no huge pages, no RDMA device.
var bareHost = map[string]string{
	"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":                 "0",
	"sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages":               "0",
	"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages":              "0",
	"sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages": "0",
	"sys/devices/system/cpu/isolated":                                       "",
	"sys/devices/system/clocksource/clocksource0/current_clocksource":       "tsc",
	"sys/class/net/lo/ifindex":                                              "1",
	"proc/meminfo":                                                          "HugePages_Total: 0\nHugepagesize: 2048 kB",
	"proc/mounts":                                                           "proc /proc proc rw 0 0",
}

func TestDoctor(t *testing.T) {
	fakeHost(t, bareHost)
	code, out, errOut := runCLI(t, "doctor")
	if code != 1 || !strings.Contains(errOut, "2 check(s) failed: hugepages, rdma") {
		t.Fatalf("doctor: %d %q %q", code, out, errOut)
	}
	for _, want := range []string{"FAIL  hugepages", "no huge pages reserved", "fix: appliance setup hugepages",
		"FAIL  rdma", "no RDMA devices", "WARN  isolated-cores", "OK    clocksource", "2 FAIL"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q missing from:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "doctor", "--json")
	var doc struct {
		Status host.Status
		Checks []host.Result
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 1 || err != nil || doc.Status != host.Fail || len(doc.Checks) != len(host.Checks) {
		t.Fatalf("doctor --json: %d %v %+v", code, err, doc)
	}
}

func TestDoctorHealthyHost(t *testing.T) {
	files := map[string]string{}
	for k, v := range bareHost {
		files[k] = v
	}
	files["sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"] = "1024"
	files["sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"] = "1024"
	files["proc/mounts"] = "nodev /dev/hugepages hugetlbfs rw 0 0"
	files["sys/class/infiniband/rxe0/ports/1/state"] = "4: ACTIVE"
	files["sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0"] = "eth0"
	files["sys/class/infiniband_verbs/uverbs0/ibdev"] = "rxe0"
	fakeHost(t, files)
	code, out, errOut := runCLI(t, "doctor")
	if code != 0 || !strings.Contains(out, "OK    hugepages") || !strings.Contains(out, "OK    rdma") ||
		!strings.Contains(out, "rxe0: netdevs eth0") || !strings.Contains(out, "0 FAIL") {
		t.Fatalf("doctor: %d\n%s\n%s", code, out, errOut)
	}
}

func TestSetupHugepages(t *testing.T) {
	root := fakeHost(t, bareHost)
	nr := filepath.Join(root, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
	code, out, errOut := runCLI(t, "setup", "hugepages", "--dry-run", "512")
	if code != 0 || !strings.Contains(out, "would write 512 to "+nr) {
		t.Fatalf("dry run: %d %q %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(nr); strings.TrimSpace(string(b)) != "0" {
		t.Fatalf("dry run wrote %q", b)
	}
	code, out, errOut = runCLI(t, "setup", "hugepages", "512")
	if code != 0 || !strings.Contains(out, "2 MiB pages globally: 0 before, 512 asked, 512 reserved (1 GiB)") {
		t.Fatalf("setup: %d %q %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(nr); strings.TrimSpace(string(b)) != "512" {
		t.Fatalf("wrote %q", b)
	}
	code, out, _ = runCLI(t, "setup", "hugepages", "--node", "0", "--json", "64")
	var st host.HugepageSetting
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Got != 64 || st.Node != 0 {
		t.Fatalf("setup --node 0 --json: %d %v %+v", code, err, st)
	}
	if code, _, errOut = runCLI(t, "setup", "hugepages", "--node", "2", "8"); code != 1 || !strings.Contains(errOut, "NUMA node 2") {
		t.Fatalf("missing node: %d %q", code, errOut)
	}
	if code, _, errOut = runCLI(t, "setup", "hugepages", "--size", "1G", "--node", "0", "8"); code != 1 ||
		!strings.Contains(errOut, "NUMA node 0 has no") {
		t.Fatalf("1G on node without it: %d %q", code, errOut)
	}
	if code, _, errOut = runCLI(t, "setup", "hugepages", "--size", "3T", "8"); code != 2 || !strings.Contains(errOut, "want 2M or 1G") {
		t.Fatalf("bad size: %d %q", code, errOut)
	}
	if code, _, _ = runCLI(t, "setup", "hugepages", "many"); code != 2 {
		t.Fatalf("bad count: %d", code)
	}
}
