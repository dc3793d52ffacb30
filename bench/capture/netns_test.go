//go:build linux

package capture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/netns"
)

// linkPair is a veth link between two fresh network namespaces: the sender
// side A and the capture side B. Traffic never leaves them.
type linkPair = netns.Pair

func newLinkPair(tb testing.TB) *linkPair {
	reapStaleCgroups()
	return netns.TestPair(tb, "cap", 0)
}

func inNetns(ns string, f func() error) error { return netns.Do(ns, f) }

// reapStaleCgroups deletes CPU cgroups a killed earlier run left behind:
// capbench + the pid of a process that is gone.
func reapStaleCgroups() {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/cpu"} {
		cgs, _ := filepath.Glob(dir + "/capbench*")
		for _, cg := range cgs {
			pid := strings.TrimPrefix(filepath.Base(cg), "capbench")
			if _, err := os.Stat("/proc/" + pid); os.IsNotExist(err) {
				_ = os.Remove(cg)
			}
		}
	}
}
