// Package filter compiles tcpdump's filter expressions (pcap-filter(7)) to
// classic BPF, in pure Go, and runs the programs on frames in user space.
//
// The grammar is the common part of libpcap's: and/or/not (&&, ||, !) with
// parentheses; host, net (CIDR, "mask", or a dotted prefix), port and
// portrange with src/dst qualifiers; the protocol keywords ether, ip, ip6,
// arp, rarp, tcp, udp, icmp, icmp6 ("ip proto N", "ether proto N", "ether
// host MAC", broadcast and multicast); vlan [ID]; len, less, greater; and
// relations between arithmetic expressions over byte loads such as
// udp[8:4] & 0xffffff = 17, with tcpflags, icmptype and their named values.
// An identifier after and/or without a keyword inherits the last primitive's
// qualifiers ("port 80 or 443"), and the first vlan keyword moves the
// offsets of everything after it, both as in libpcap. Host names are not
// resolved: a capture filter that depends on DNS is a capture that differs
// between machines.
//
// Compile produces two programs. Wire reads frames as they are on the wire
// (VLAN tags in place): it is what tcpdump compiles for a savefile, and what
// user-space ports (DPDK, rings) and pcap readers filter with. Kernel is for
// SO_ATTACH_FILTER on an AF_PACKET socket, where Linux has taken the outer
// VLAN tag out of the frame before the filter runs: it reads that tag from
// the kernel's ancillary fields, so both programs accept the same frames
// (an expression without vlan rejects tagged frames in both, as tcpdump does
// on a savefile; only raw ether[] loads past byte 12 of a tagged frame see
// different bytes). A match returns the snap length, so the kernel copies
// no more than that.
//
// The programs are not optimized like libpcap's; they accept and reject the
// same frames as tcpdump's for the same expression, including its quirk of
// rejecting a frame outright when a load runs past its end. The package's
// differential test holds that against tcpdump's own programs (`tcpdump -ddd`
// outputs kept in testdata, refreshed when tcpdump is installed).
package filter
