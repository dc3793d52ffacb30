package inject

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/service"
)

// Defaults of the injector service: the HTTP control address, and a
// packet pool with room for 9000-byte frames.
const (
	DefaultListen   = "127.0.0.1:9100"
	defaultPoolSize = 4096
	defaultDataRoom = 9216 + dpdk.Headroom
)

// RunOptions are what Run needs beyond the spec.
type RunOptions struct {
	Log *slog.Logger
	// Pin claims a core for owner and pins the calling (locked) thread to
	// it, when the spec names a core; the core claims are the process's.
	Pin func(core int, owner string) (release func(), err error)
	// Reload, when set, re-reads the spec on SIGHUP (systemctl reload);
	// what it returns is applied between two bursts, or refused whole.
	Reload func() (Spec, error)
}

// Run is the software injector service (`appliance inject run`): it opens
// the spec's ports, runs the pipeline loop (pinned when the spec says so)
// and serves the control API until ctx ends. The stats are nil when it
// failed before serving; the end of ctx is a clean stop.
func Run(ctx context.Context, s Spec, o RunOptions) (*mirror.InjectorStats, error) {
	n := s.Pool
	if n == 0 {
		n = defaultPoolSize
	}
	pool, err := dpdk.NewPool("inject", n, defaultDataRoom)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	cfg, ports, err := s.Config(pool, func(ps PortSpec) (dpdk.Port, error) {
		q := max(ps.Queues, 1)
		c := dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: q, Promiscuous: true}
		return dpdk.Open(ps.Port, c)
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range ports {
			p.Close()
		}
	}()
	in, err := New(cfg)
	if err != nil {
		return nil, err
	}
	listen := s.Listen
	if listen == "" {
		listen = DefaultListen
	}
	svc := service.New("inject", listen, o.Log)
	in.Register(svc)
	svc.Go("injector loop", func(ctx context.Context) error {
		if s.Core != nil && *s.Core >= 0 {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			release, err := o.Pin(*s.Core, "inject "+listen)
			if err != nil {
				return err
			}
			defer release()
		}
		return in.Run(ctx)
	})
	if o.Reload != nil {
		in.reloadOnHangup(svc, s, o)
	}
	for _, p := range cfg.Traffic {
		o.Log.Info("traffic port", "name", p.Name, "port", p.Port.Info().Name, "addrs", p.Addrs)
	}
	for _, p := range cfg.Mirrors {
		o.Log.Info("mirror port", "name", p.Name, "port", p.Port.Info().Name, "weight", p.Weight)
	}
	err = svc.Run(ctx)
	st := in.Stats()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return &st, err
}

// reloadOnHangup applies o.Reload's spec on every SIGHUP while svc runs,
// counting the outcomes for the operator.
func (in *Injector) reloadOnHangup(svc *service.Service, s Spec, o RunOptions) {
	reloads := svc.Metrics.CounterVec("appliance_inject_config_reloads_total",
		"SIGHUP reloads of the injector file, applied (ok) or refused whole (refused: a bad file or a change that needs a restart).", "result")
	svc.Go("SIGHUP reload", func(ctx context.Context) error {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		cur := s
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
			}
			if err := in.reload(&cur, o.Reload); err != nil {
				reloads.WithLabelValues("refused").Inc()
				o.Log.Error("configuration not reloaded", "err", err)
				continue
			}
			reloads.WithLabelValues("ok").Inc()
			o.Log.Info("configuration reloaded", "routes", len(cur.Routes), "balance", cur.Balance)
		}
	})
}

// reload applies the file's changes to the running injector, or none of
// them: a file that does not load or changes what needs a restart leaves
// the injector as it was.
func (in *Injector) reload(cur *Spec, reload func() (Spec, error)) error {
	next, err := reload()
	if err != nil {
		return err
	}
	u, err := next.Update(cur)
	if err != nil {
		return err
	}
	if err := in.Apply(u); err != nil {
		return err
	}
	*cur = next
	return nil
}
