package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
)

// TestCoreRefused: a service asked to poll on a core that another poller
// of the host holds (here another process's claim, as its lock file)
// exits with the reason instead of sharing it; the same core is free
// again once its owner lets it go.
func TestCoreRefused(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(coreDirEnv, dir)
	other := dpdk.NewCoreClaims(dir)
	if err := other.Claim(0, "dumper d0 queue 0"); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("cores%d", time.Now().UnixNano()%1e6)
	spec := filepath.Join(t.TempDir(), "inj.yml")
	err := os.WriteFile(spec, []byte(fmt.Sprintf(`listen: %s
core: 0
ports:
  - {name: req, role: traffic, port: "ring:%[2]sr.b", addrs: [10.0.0.254]}
  - {name: resp, role: traffic, port: "ring:%[2]ss.b", addrs: [10.0.1.254]}
`, freeAddr(t), id)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "inject", "run", "-f", spec)
	if code == 0 || !strings.Contains(errOut, "core 0 is already polled by another process (pid") ||
		!strings.Contains(errOut, "dumper d0 queue 0") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "verbs", "write", "--nic", "ring:"+id+"v.a", "--gid", "10.9.0.1", "--core", "0", "127.0.0.1:1")
	if code == 0 || !strings.Contains(errOut, "--core 0: dpdk: core 0 is already polled") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "mesh", "probe", "--nic", "ring:"+id+"m0.a", "--gid", "10.9.1.1", "--nic", "ring:"+id+"m1.a", "--gid", "10.9.1.2",
		"--cores", "0", "--duration", "1s")
	if code == 0 || !strings.Contains(errOut, "--cores: dpdk: core 0 is already polled by another process") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	other.Release(0)
	release, err := pinClaimed(0, "test")
	if err != nil {
		t.Fatal(err)
	}
	release()
}
