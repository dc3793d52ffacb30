package cli

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/rdma-appliance/appliance/dpdk"
)

// coreDirEnv overrides where pollers record their cores (for a user who
// cannot write /run, or a test).
const coreDirEnv = "APPLIANCE_CORE_DIR"

var (
	claimsMu sync.Mutex
	claimsBy = map[string]*dpdk.CoreClaims{}
)

// coreClaims is the process's table of polled cores. Its lock files (under
// dpdk.DefaultCoreClaimsDir, or $APPLIANCE_CORE_DIR) make every service of
// the host refuse a core another poller owns, whichever process it is in.
func coreClaims() *dpdk.CoreClaims {
	dir := os.Getenv(coreDirEnv)
	if dir == "" {
		dir = dpdk.DefaultCoreClaimsDir
	}
	claimsMu.Lock()
	defer claimsMu.Unlock()
	c := claimsBy[dir]
	if c == nil {
		c = dpdk.NewCoreClaims(dir)
		claimsBy[dir] = c
	}
	return c
}

// pinClaimed claims core for owner and pins the calling goroutine's
// (locked) thread to it; release gives the core back.
func pinClaimed(core int, owner string) (release func(), err error) {
	c := coreClaims()
	if err := c.Claim(core, owner); err != nil {
		return nil, err
	}
	if err := dpdk.Pin(core); err != nil {
		c.Release(core)
		return nil, fmt.Errorf("pinning %s to core %d: %w", owner, core, err)
	}
	return func() { c.Release(core) }, nil
}

// onThread runs f on a locked OS thread, pinned to core when core >= 0
// (claimed for owner: no other poller of the host may have it).
func onThread(core int, owner string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if core >= 0 {
			release, err := pinClaimed(core, owner)
			if err != nil {
				errc <- fmt.Errorf("--core %d: %w", core, err)
				return
			}
			defer release()
		}
		errc <- f()
	}()
	return <-errc
}
