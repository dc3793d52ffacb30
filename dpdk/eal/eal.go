//go:build dpdk

package eal

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	goeal "github.com/yerden/go-dpdk/eal"
)

// Enabled says whether this build has the DPDK driver.
const Enabled = true

var (
	initOnce  sync.Once
	initArgs  []string
	initErr   error
	initVdevs map[string]string
	initDone  atomic.Bool
	lazyMu    sync.Mutex
)

// Init initialises DPDK's EAL with args, the EAL options without a program
// name (for example DefaultArgs plus "--vdev=net_ring0"). The EAL can be
// initialised once per process: calling Init again with the same args returns
// the first call's result, with other args an error, since rte_eal_init cannot
// run twice. Opening a port before Init initialises the EAL with
// $APPLIANCE_EAL_ARGS or DefaultArgs.
//
// go-dpdk's Init runs rte_eal_init on a goroutine locked to its thread for
// good: the EAL pins the thread that initialises it to the main lcore, and such
// a thread must never go back to the Go scheduler.
func Init(args []string) error {
	args = append([]string(nil), args...)
	initOnce.Do(func() {
		initArgs = args
		initVdevs = vdevArgs(args)
		argv := append([]string{filepath.Base(os.Args[0])}, args...)
		if _, err := goeal.Init(argv); err != nil {
			initErr = fmt.Errorf("eal: rte_eal_init %q: %w", args, err)
		}
		initDone.Store(true)
	})
	if !sameArgs(args, initArgs) {
		return fmt.Errorf("eal: EAL already initialised with %q, cannot initialise again with %q", initArgs, args)
	}
	return initErr
}

// Initialized reports whether Init has run (successfully or not).
func Initialized() bool { return initDone.Load() }

// Args returns the arguments the EAL was initialised with, nil before Init.
func Args() []string {
	if !Initialized() {
		return nil
	}
	return append([]string(nil), initArgs...)
}

// ensureInit initialises the EAL with the lazy default unless it is already
// up, whatever its arguments: a port opened after an explicit Init uses that
// EAL and hot-plugs its device if need be.
func ensureInit(devargs string) error {
	lazyMu.Lock()
	defer lazyMu.Unlock()
	if Initialized() {
		return initErr
	}
	return Init(lazyArgs(devargs))
}
