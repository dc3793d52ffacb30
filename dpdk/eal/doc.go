// Package eal is the DPDK port driver: a dpdk.Port on any DPDK 22.11 poll-mode
// driver (a NIC bound to vfio-pci, or a virtual device such as net_null,
// net_ring, net_af_packet or net_pcap) through cgo. It is compiled only with
// the dpdk build tag; without it the package registers a driver whose Open
// says to rebuild with -tags dpdk, so the default build stays pure Go.
//
// Ports are opened from strings:
//
//	eal:DEVNAME[,key=value...]
//
// DEVNAME is an ethdev name: a vdev ("net_null0", "net_ring0",
// "net_af_packet0") or a PCI address ("0000:3b:00.0"). A device that does not
// exist yet is hot-plugged with rte_dev_probe, the options becoming its device
// arguments ("eal:net_af_packet0,iface=veth0"), so one process can open many
// vdevs after a single EAL initialisation; closing the port unplugs it again.
//
// The EAL is initialised once per process, either explicitly with Init or, on
// the first Open, from $APPLIANCE_EAL_ARGS or DefaultArgs, which need no huge
// pages (the first device is added: a vdev with --vdev, a PCI address with -a
// in place of --no-pci). Production NICs want huge pages: set
// APPLIANCE_EAL_ARGS, e.g. "-l 2-3 -a 0000:3b:00.0 --file-prefix appliance".
//
// A burst is one cgo call. The packets live in the caller's dpdk.Pool, whose
// arena is outside the Go heap, so C copies received mbufs straight into them
// and copies transmitted packets into mbufs from the port's own mempool: DPDK
// never holds a Go buffer and the Go side never sees an mbuf. Each receive queue
// keeps a stack of spare buffers from the pool (as many as the largest burst
// asked for, at most MaxBurst), the way a NIC keeps its receive ring filled, so
// RxBurst on an idle queue costs one cgo call and nothing else.
//
// Pollers are ordinary goroutines, on threads DPDK does not know. The first
// burst on a thread registers it as a non-EAL lcore (rte_thread_register) so
// that mbuf allocation and freeing go through the per-lcore mempool cache
// rather than an atomic ring operation per mbuf; the registration is undone
// and the cache flushed when the thread exits. Queues follow DPDK's rule: one
// goroutine per queue at a time, different queues concurrently.
package eal
