package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// rnicFlags are the flags of commands that use an RDMA device: a verbs
// device by name, or a software RNIC created on a packet port.
type rnicFlags struct {
	dev       string
	nic       string
	gids      string
	neighbors string
	profile   string
	gidIndex  int
	ibPort    int
}

func (f *rnicFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.dev, "d", "", "RDMA device to use, as listed by 'appliance verbs devices' (e.g. ibv:mlx5_0); alias --ib-dev")
	fs.StringVar(&f.dev, "ib-dev", "", "RDMA device to use (see -d)")
	fs.StringVar(&f.nic, "nic", "", "run a software RNIC on this packet port instead (e.g. afpacket:eth1, eal:0000:3b:00.0)")
	fs.StringVar(&f.gids, "gid", "", "the software RNIC's GIDs: comma-separated IPv4/IPv6 addresses (GID index 0, 1, ...)")
	fs.StringVar(&f.neighbors, "neighbor", "", "static neighbours of the software RNIC: IP=MAC,... (others are resolved with ARP/ND)")
	fs.StringVar(&f.profile, "profile", "cx5", "software RNIC behaviour profile: cx4, cx5, cx6, e810")
	fs.IntVar(&f.gidIndex, "x", 0, "GID index; alias --gid-index")
	fs.IntVar(&f.gidIndex, "gid-index", 0, "GID index (see -x)")
	fs.IntVar(&f.ibPort, "i", 1, "device port; alias --ib-port")
	fs.IntVar(&f.ibPort, "ib-port", 1, "device port (see -i)")
}

// rnic is an opened device; Poll is set for a software RNIC, which the
// caller drives from its own (pinned) thread.
type rnic struct {
	Dev   verbs.Device
	Poll  func() bool
	close func()
}

func (r *rnic) Close() {
	if r.close != nil {
		r.close()
	}
}

// drive polls a software RNIC on a thread of its own (pinned to core when
// core >= 0, claimed for owner) until stop, which waits for the loop to
// end; a device that needs no driving gets a stop that does nothing. A
// core that cannot be claimed leaves the RNIC undriven without a word, as
// the commands that drive one always did.
func (r *rnic) drive(core int, owner string) (stop func()) {
	if r.Poll == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = onThread(core, owner, func() error {
			bo := dpdk.DefaultBackoff()
			for ctx.Err() == nil {
				if r.Poll() {
					bo.Busy()
				} else {
					bo.Idle()
				}
			}
			return nil
		})
	}()
	return func() {
		cancel()
		<-done
	}
}

// open opens the device the flags name.
func (f *rnicFlags) open(name string) (*rnic, error) {
	switch {
	case f.dev != "" && f.nic != "":
		return nil, Usagef("give either -d DEVICE or --nic PORT, not both")
	case f.dev != "":
		d, err := verbs.OpenDevice(f.dev)
		if err != nil {
			return nil, err
		}
		return &rnic{Dev: d, close: func() { d.Close() }}, nil
	case f.nic == "":
		return nil, Usagef("need -d DEVICE (an RDMA device) or --nic PORT --gid IP (a software RNIC on a packet port)")
	}
	cfg := soft.Config{}
	var err error
	if cfg.GIDs, err = parseAddrs(f.gids); err != nil {
		return nil, Usagef("--gid: %v", err)
	}
	if len(cfg.GIDs) == 0 {
		return nil, Usagef("--nic needs --gid: the software RNIC's address(es)")
	}
	if cfg.Neighbors, err = parseNeighbors(f.neighbors); err != nil {
		return nil, Usagef("--neighbor: %v", err)
	}
	if cfg.Profile, err = soft.ProfileByName(f.profile); err != nil {
		return nil, Usagef("--profile: %v", err)
	}
	pool, err := dpdk.NewPool(name, 8192, dpdk.Headroom+4096+256)
	if err != nil {
		return nil, err
	}
	port, err := dpdk.Open(f.nic, dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1})
	if err != nil {
		pool.Close()
		return nil, err
	}
	cfg.Pool = pool
	d, err := soft.NewDevice(name, port, cfg)
	if err != nil {
		port.Close()
		pool.Close()
		return nil, err
	}
	return &rnic{Dev: d, Poll: d.Poll, close: func() {
		d.Close()
		port.Close()
		pool.Close()
	}}, nil
}

func parseAddrs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func parseNeighbors(s string) (map[netip.Addr]header.MAC, error) {
	out := map[netip.Addr]header.MAC{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ip, mac, ok := strings.Cut(f, "=")
		if !ok {
			return nil, errors.New("want IP=MAC, got " + f)
		}
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return nil, err
		}
		hw, err := net.ParseMAC(mac)
		if err != nil || len(hw) != 6 {
			return nil, fmt.Errorf("bad MAC %q", mac)
		}
		out[a] = header.MAC(hw)
	}
	return out, nil
}
