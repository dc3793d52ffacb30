// Package trace rebuilds the packet trace of a Lumina test from the files of
// its dumper pool and checks that the trace is complete.
//
// The event injector mirrors every RoCE packet it receives to a pool of
// dumpers (weighted round-robin, per packet), writing into each copy a
// 48-bit mirror sequence number (source MAC), a 48-bit nanosecond ingress
// timestamp (destination MAC) and the injected event (IPv4 TTL / IPv6 hop
// limit); see internal/mirror/mirror.go. Each dumper writes its share,
// restored (mirror.Restore) and sorted by sequence, to one or more
// pcap files, one per worker. Merge reads all of them at once, one record
// per file at a time, and merges them by mirror sequence with a heap (a
// streaming k-way merge: memory depends on the number of files, not on
// the trace's length), writing the merged trace with each record stamped
// with its mirror timestamp, extended past the 48-bit wraparound.
//
// Every merged packet goes through the integrity check of Lumina §3.6, the
// paper's four conditions and three more:
//
//	1 the mirror sequence numbers are consecutive: no gap, no duplicate
//	2 the mirror timestamps increase, unless they wrap around (48 bits)
//	3 the packet count equals the injector's mirrored-copy counter
//	4 the packet count equals the RoCE packets the injector received
//	5 the timestamps increase within each direction (source IP, destination IP)
//	6 each dumper file is in sequence order
//	7 every dumper's output is complete: present, readable, not truncated
//
// A trace that fails any of them is an invalid test: Merge returns an
// *InvalidTestError (errors.Is(err, ErrInvalidTest)) listing every violated
// condition with its first offending sequence numbers, together with the
// Report, which holds the full figures. A dumper whose file is missing,
// unreadable or cut short is named; given the injector's round-robin
// schedule (Options.Assign, see ScheduleAssign), the missing sequence
// numbers are attributed to the dumpers they were sent to.
//
// Sequence numbers are compared as they are: the 48-bit counter would wrap
// after 2^48 copies (a month at 100 Mpps), far beyond a test.
//
// Records that are not mirrored RoCE copies (too short for Ethernet, IP or
// UDP, not IP, not UDP, another UDP port, another link type) are counted
// by reason and skipped; no input makes Merge panic. Merging allocates
// nothing per packet in steady state.
package trace
