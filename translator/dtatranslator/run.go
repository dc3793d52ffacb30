package dtatranslator

import (
	"context"
	"errors"
	"log/slog"
	"runtime"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/service"
)

// RunOptions are what Run needs beyond the spec.
type RunOptions struct {
	Log *slog.Logger
	// Pin claims a core for owner and pins the calling (locked) thread to
	// it, when the spec names a core; the core claims are the process's.
	Pin func(core int, owner string) (release func(), err error)
}

// Run is the translator service (`appliance dta translate`): it opens the
// spec's port, runs the translator loop (pinned when the spec says so) and
// serves HTTP on s.Listen until ctx ends, and returns the last status.
func Run(ctx context.Context, s Spec, o RunOptions) (Status, error) {
	pool, err := dpdk.NewPool("dta-translate", s.Pool, 0)
	if err != nil {
		return Status{}, err
	}
	defer pool.Close()
	p, err := dpdk.Open(s.Port, dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1, Promiscuous: true})
	if err != nil {
		return Status{}, err
	}
	defer p.Close()
	sv, err := NewService(s, p, pool, o.Log)
	if err != nil {
		return Status{}, err
	}
	h := service.New("dta-translate", s.Listen, o.Log)
	sv.Register(h)
	h.Go("translator loop", func(ctx context.Context) error {
		if s.Core != nil {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			release, err := o.Pin(*s.Core, "dta translate "+s.Name)
			if err != nil {
				return err
			}
			defer release()
		}
		return sv.Run(ctx)
	})
	o.Log.Info("translator", "port", p.Info().Name, "ip", s.IP, "collectors", len(s.Collectors), "http", s.Listen)
	err = h.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return sv.Status(), err
}
