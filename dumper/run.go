package dumper

import (
	"context"
	"log/slog"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/service"
)

// DefaultListen is the dumper service's HTTP control address.
const DefaultListen = "127.0.0.1:9200"

// RunOptions run a dumper as a service (`appliance dump`).
type RunOptions struct {
	// Config is the dumper's; its Port is opened here, from PortName with
	// Queues receive queues and a pool of PoolSize buffers.
	Config   Config
	PortName string
	Queues   int
	PoolSize int
	// Listen is the HTTP control address.
	Listen string
	// Start captures at once instead of waiting for POST /v1/start; with
	// Duration the capture stops, is written and Run returns after it.
	Start    bool
	Duration time.Duration
	Log      *slog.Logger
}

// Run serves the dumper's control API until ctx ends (or Duration
// passes), and returns the files of the last capture and the status.
func Run(ctx context.Context, o RunOptions) ([]File, Status, error) {
	pool, err := dpdk.NewPool("dump", o.PoolSize, 0)
	if err != nil {
		return nil, Status{}, err
	}
	defer pool.Close()
	p, err := dpdk.Open(o.PortName, dpdk.Config{Pool: pool, RxQueues: o.Queues, TxQueues: 1, Promiscuous: true})
	if err != nil {
		return nil, Status{}, err
	}
	defer p.Close()
	cfg := o.Config
	cfg.Port = p
	d, err := New(cfg)
	if err != nil {
		return nil, Status{}, err
	}
	defer d.Close()
	svc := service.New("dump", o.Listen, o.Log)
	d.Register(svc)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Start {
		if err := d.Start(); err != nil {
			return nil, Status{}, err
		}
		o.Log.Info("capturing", "port", p.Info().Name, "queues", o.Queues, "num_pkts", cfg.NumPkts, "snap_len", cfg.SnapLen)
		if o.Duration > 0 {
			t := time.AfterFunc(o.Duration, cancel)
			defer t.Stop()
		}
	}
	if err := svc.Run(runCtx); err != nil {
		return nil, Status{}, err
	}
	return d.Files(), d.Status(), nil
}
