// Package afpacket is the Linux kernel port driver: a dpdk.Port on any network
// interface (a veth end in a namespace, a NIC without a DPDK driver) through
// AF_PACKET sockets with TPACKET_V3 memory-mapped rings, like DPDK's
// net_af_packet PMD.
//
// Each RX queue is one socket with its own TPACKET_V3 receive ring; when a port
// has several RX queues their sockets join one PACKET_FANOUT group, so the
// kernel spreads frames over the queues (by flow hash by default) the way a NIC
// spreads them over RSS queues. RxBurst walks the ring's blocks without a
// system call: it checks a block's status word, copies the frames into packets
// from the port's pool and hands the block back to the kernel when it has read
// it all. It never blocks; a service that would rather sleep than spin when
// idle calls Port.Wait between bursts. Each TX queue is a socket of its own with the qdisc bypassed, sending
// a burst with one sendmmsg (the default) or through a TX ring kicked by one
// sendto.
//
// Ports are opened from strings:
//
//	afpacket:IFNAME[,fanout=hash|lb|cpu|qm|rnd][,blocksize=256K][,blocks=256][,frame=2048]
//	               [,timeout=2ms][,tx=mmsg|ring][,snaplen=N][,rxhash=1][,hwtstamp=1]
//
// blocksize and blocks shape each RX ring, timeout is how long the kernel keeps
// a partly filled block before handing it over (the latency bound at low rates),
// frame is the TX ring slot size (and the nominal RX frame size the kernel
// checks), snaplen truncates frames in the kernel with a one-instruction BPF
// filter as libpcap does, rxhash has the kernel report each frame's flow
// hash in Packet.Hash, and hwtstamp asks for NIC hardware timestamps where
// the device has them enabled (they are then in the NIC's clock, not
// necessarily the system's). Config.RingSize is the number of TX ring slots.
//
// A TPACKET_V3 ring hands frames over a block at a time, so at low rates a
// frame waits up to the retire timeout before RxBurst can see it, however
// fast the port is polled: timeout=1 (1 ms, the least the kernel takes)
// suits latency-sensitive services, a long one (libpcap uses 1 s) capture.
//
// The driver needs CAP_NET_RAW. It exists only on Linux; elsewhere Open
// returns an error.
package afpacket
