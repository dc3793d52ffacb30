package dtacollector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/verbs"
)

// ExchangeAddr is where the exchange listens: the spec's address, or
// by default the collector's RDMA address on port 40050.
func (c *Collector) ExchangeAddr() string {
	if c.spec.Exchange != "" {
		return c.spec.Exchange
	}
	return net.JoinHostPort(c.ip.String(), strconv.Itoa(dtamem.ExchangePort))
}

// Run is the collector service (`appliance dta collect`): the collector
// of s on dev serves translators on s.Exchange and queries on s.Listen
// until ctx ends, and returns its last stats. The caller drives a software
// RNIC's loop until Run returns: QPs are destroyed through it.
func Run(ctx context.Context, s Spec, dev verbs.Device, opt Options) (Stats, error) {
	c, err := New(s, dev, opt)
	if err != nil {
		return Stats{}, err
	}
	defer c.Close()
	ln, err := net.Listen("tcp", c.ExchangeAddr())
	if err != nil {
		return Stats{}, fmt.Errorf("exchange: %w", err)
	}
	h := service.New("dta-collect", s.Listen, opt.Log)
	c.Register(h)
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx, ln) }()
	var last Stats
	h.OnStop("collector", func(context.Context) error {
		last = c.Stats()
		return errors.Join(c.Close(), <-served)
	})
	if err := h.Run(ctx); err != nil {
		return last, err
	}
	return last, nil
}
