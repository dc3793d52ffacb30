// Package dpdk provides poll-mode packet ports in the shape of DPDK's ethdev:
// ports with several receive and transmit queues, burst receive and transmit of
// packet buffers taken from a fixed-size mempool, per-queue use from workers
// pinned to cores, and port statistics.
//
// The drivers live in subpackages: dpdk/ring (in-process link pairs, for tests
// and the lab), dpdk/afpacket (Linux TPACKET_V3, for veth/netns and NICs without
// DPDK) and dpdk/eal (DPDK poll-mode drivers through cgo, built with the dpdk
// tag). Drivers register themselves, so a service can open any port from a
// string such as "ring:lab0.a", "afpacket:veth0" or "eal:net_null0".
//
// The ownership rules are DPDK's: RxBurst hands the packets it returns to the
// caller, who must transmit or free them; TxBurst takes ownership of the packets
// it accepts and leaves the rest (the tail of the slice) with the caller. A
// queue is used by one goroutine at a time; different queues of one port may be
// used concurrently.
package dpdk
