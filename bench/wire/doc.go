// Package wire measures the appliance's packet header decoding against
// gopacket, side by side on the same RoCEv2 frames. It has no API: the
// benchmarks and the agreement test are in its test files.
//
// Our side is verbs/roce.Parse (the Ethernet, 802.1Q, IP and UDP layers,
// then BTH, opcode table, extended header layout and pad checks; the common
// layouts in one pass, the others through dpdk/header.Decode) and reads
// fields of the extended headers; gopacket's side is a DecodingLayerParser over
// Ethernet, Dot1Q, IPv4, IPv6, UDP and Payload, since gopacket has no BTH
// layer. Our side therefore does strictly more work per packet.
//
//	go test -run '^$' -bench . ./bench/wire
//
// BenchmarkVsGopacket times both over the same packets, in turns of 1024
// packets so that load from other work falls on both alike, and reports
// ours-ns/pkt, gopacket-ns/pkt and the ratio x-vs-gopacket (how many times
// faster ours is).
package wire
