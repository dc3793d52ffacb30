/* p4/dtatofino/translator.p4: the DTA translator for Tofino 1 (TNA, P4_16).
 *
 * The collector's top-of-rack switch: it forwards ordinary IPv4 traffic and
 * turns DTA reports (UDP 40040) addressed to one of its collectors into
 * RoCEv2 RC packets on the translator's queue pair with that collector, the
 * same packets the Go translator (translator/dtatranslator) sends, to the same
 * collector memory layout. The Go control plane in this directory
 * (Translator.Script) fills the tables and registers.
 *
 *   Key-Write      N RDMA WRITE Only of {CRC32(key), data} (8 B) to slot
 *                  n = CRC32_n(key ++ n) & (slots - 1), n = 0..N-1
 *   Key-Increment  N RDMA FETCH_ADD of the counter at the same slots (8 B)
 *   Append         one RDMA WRITE Only of B {data, sequence} entries at
 *                  the list's base + (head mod entries) * 8 per B reports
 *                  of the list (the batch B: 4, or 2 or 1 by build)
 *   Postcarder     the hops of a flow gathered in registers; one WRITE of
 *                  {CRC32(key), hop bitmap, hop 0..HOPS-1 data} at the
 *                  key's slot 0 once every hop has reported
 *   Sketch-Merge   (opcode 5, our own format; built with -DDTA_SKETCH_MERGE)
 *                  a sketch's columns of SKETCH_ROWS (2) counters merged
 *                  over its reporters in ingress registers (Count-Min
 *                  summed, HyperLogLog maxed); one WRITE Only of the
 *                  merged column (8 bytes) at base + column * 8 once
 *                  every reporter has sent it this round. Without the
 *                  flag such reports are dropped and counted (unknown).
 *
 * Why it is built this way:
 *   - N copies of one report: the public translator replicates through the
 *     packet replication engine, and so does this one. The control plane
 *     makes one multicast group per (collector, N) with N nodes on the
 *     collector's port whose replication ids are 0..N-1; egress reads n
 *     from egress_rid.
 *   - The slot of copy n uses its own CRC polynomial (IEEE, Castagnoli,
 *     Koopman, CRC-32Q, as internal/dtamem/layout.go does for n = 0..3):
 *     one CRC over key ++ n is linear in n, so keys colliding in one row
 *     would collide in every row. Each polynomial is a CRCPolynomial extern
 *     with the reflected in/out, all-ones init and final xor of Go's
 *     hash/crc32, over the key's four bytes then n, so the Tofino and the
 *     software translators address the same slots (a Go test runs the
 *     declared polynomials against dta.Slot). N is at most MAX_REDUNDANCY
 *     (4, the paper's default query width) here, 8 in software.
 *   - Everything a collector's packets share lives in egress, in the pipe
 *     of the collector's port: the PSN register, the Append heads and
 *     sequences, and the postcard cache. Ingress registers are per ingress
 *     pipe, and reports for one collector may come in on every pipe.
 *   - An Append batch is gathered in the ingress, though: the egress has
 *     no stage left (the ICRC takes its last ones), and a batch's place
 *     in the ring is still the egress's, which moves the list's head by B
 *     per batch. Reports of one list coming in on two pipes make batches
 *     of their own pipe's entries. The gathering costs the ingress two
 *     stages (9 to 11 of 12); the egress reads B sequence registers side
 *     by side where it read one, and hashes 56 bytes for the batch's ICRC
 *     (B = 4) beside the others, in the same 12 stages. A batch waits
 *     for its last entry: a data plane has no timer to flush it, where
 *     the software translator writes a partial batch after its flush
 *     timeout. Build with -DDTA_APPEND_BATCH=1 for a WRITE per entry.
 *   - VAs are two 32-bit halves: a region may not cross a 4 GiB boundary
 *     (the control plane checks), so an offset is one 32-bit add.
 *   - A RegisterAction touches its register once per pass, so the postcard
 *     cache is a key register, a hop-bitmap register and one data register
 *     per hop. The bitmap register clears itself when the last hop
 *     arrives (the record's bitmap is then full), so the next postcard of
 *     the flow starts a new record. A flow pushed out of the cache by another before
 *     it completed is counted, not written (the software translator writes
 *     the partial record, and also flushes old flows on a timer, which a
 *     data plane without a CPU cannot).
 *   - The report frame is reused: its parsed headers are rewritten or
 *     invalidated and the new ones emitted. Bytes the parser did not read
 *     (Ethernet padding of a short report) stay behind the ICRC; the IPv4
 *     and UDP lengths end the RoCE packet before them, and receivers treat
 *     them as link padding.
 *   - The ICRC: the RoCE invariant CRC covers the masked IP and UDP
 *     headers, the transport headers and the payload. The public translator
 *     left it invalid and the collector's RNIC had to be told not to check
 *     it; this one computes it, as the software translator does. A CRC is
 *     linear: everything up to the BTH's destination QP (eight 0xff bytes,
 *     the masked IPv4 and UDP headers, opcode, P_Key, QPN) is the same in
 *     every packet of one shape to one collector, so the control plane
 *     runs the CRC over it once per (collector, shape) and installs, in
 *     rdma_conn, the four bytes that lead a CRC register from 0 to the
 *     state it leaves (a Tofino Hash cannot start from a run-time state;
 *     it can hash a field first). The egress hashes those four bytes and
 *     the 28-48 bytes that vary (AckReq and PSN, the RETH or AtomicETH,
 *     the payload) with initial value 0: one Hash per shape, over the
 *     values where they are computed rather than the headers written from
 *     them, so the hash runs beside those writes. The AckReq bit comes
 *     from a register of its own (ack_phase) beside the PSN's, since
 *     testing the PSN's low bits would take a stage before the hash.
 *     p4/dtatofino's tests hold the field lists to a Go model of this
 *     egress that builds the same packets, ICRC included, as the software
 *     translator, byte for byte, on the lab's report mix.
 *   - Tofino's rules shaped the pipeline: a table's hit is tested in an if
 *     of its own (flags tell reports and answers from other traffic); an
 *     action does one ALU operation per field, so an entry's address is
 *     computed in steps (slot within the region, times the entry size,
 *     plus the base); a stateful ALU outputs one kind of value, so the
 *     postcard bitmap register returns the bitmap before the update and
 *     a known flow is complete when it held every other hop; a counter
 *     serves one table per packet, so evictions have their own; the
 *     sequence distance is a keyless table, since as a statement the
 *     compiler folds it into conditions a gateway cannot evaluate; the
 *     postcard cache index is a hash of its own and
 *     the bitmap register is a byte, which a gateway compares with the
 *     hop's complement, so the chain to the PSN is short enough for the
 *     ICRC hash after it. The README's resource table has the stages
 *     bf-p4c places each build in.
 *   - Sketch-Merge (-DDTA_SKETCH_MERGE) merges in the ingress, which has
 *     the stages the egress lacks: per (sketch, reporter) the column it
 *     sends next, per column the reporters that sent it (a bitmap, at
 *     most 16 reporters, so that a gateway compares two) and one
 *     register per row of counters. The column's last report carries
 *     the merged counters, in place of its own, to the egress. A column
 *     has 2 rows, 8 bytes: the egress writes it as a Key-Write entry
 *     (same lengths, ICRC prefix state and hash), which costs it no
 *     stage; columns of 4 rows, a WRITE shape of their own, took the
 *     egress to 13-14 of Tofino 1's 12 stages. The software translator's
 *     merge with a group of one column writes the same packets (a Go
 *     test). On Tofino 1 the merge fits beside everything but the
 *     reporters' sequence numbers: their check decides whether a report
 *     is merged, and the merge's chain after it (lookups, expected
 *     column, mask, counters, the HyperLogLog maximum) needed 16-19
 *     ingress stages; -DDTA_SKETCH_MERGE -DDTA_NO_SEQNUM -DDTA_NO_METER
 *     fits in 12 (with the rate meter too, bf-p4c's placement rounds
 *     needed 13 egress stages and the compile was stopped at 900 s), and
 *     -DDTA_SKETCH_MERGE, every feature, fits Tofino 2.
 *     Ingress registers are per pipe, so all the reporters of one
 *     sketch must come in on one pipe. Two differences: a duplicate and
 *     a gap are counted alike (SK_ORDER; the software translator drops a
 *     duplicate silently), and a reporter a round ahead (its bit still
 *     in the column's mask) is refused after its expected column moved
 *     on, since that register is read before the mask: its next columns
 *     are refused until its round comes back, where the software
 *     translator keeps waiting for the refused column. A resubmit that
 *     puts the column back would close that gap.
 *   - Flow control (the software translator's FlowSpec; left out with
     -DDTA_NO_METER): a meter per collector in the ingress, where the
     report's collector is known, run beside the sequence check so that
     it costs no stage (the default build stays at 11 ingress stages of
     Tofino 1's 12). A report's priority is its DSCP (report_priority:
     high from the translator's high-dscp). Green is translated as
     without the meter; red and high priority goes, untranslated, to the
     switch CPU's port on the queue the control plane names (flow_cfg),
     for the CPU to send back in later (its resends are high priority
     and skip the sequence check, which took them the first time); red
     and low priority is dropped. Both are counted in drop_reports
     (DROP_TO_CPU, DROP_METERED). A red low-priority report does not
     move its reporter's expected number on (seq_peek: the software
     translator's Unaccept), so the reporter's next report draws the
     NACK that has it resent. A red report of a tracked reporter with an
     ACK session draws a congestion notice (an ACK with dtawire's
     congested bit, mirrored as the ACKs are) at most once per tick of
     2^20 ns (notice_tick), about the software translator's 1 ms; an ACK
     due goes first. Differences from the software translator: the
     meter counts reports, one token each (a TNA meter is charged once
     per execution), where the software translator's counts the RDMA
     packets a report makes (N for a Key-Write or Key-Increment), so the
     control plane's rate is in reports a second; a duplicate or a gap
     takes a token too (the meter runs beside the check that tells
     them); the software translator queues every report while one
     waits, the switch only the red ones; a full CPU queue drops in the
     traffic manager, uncounted here, and the report, which the
     sequence check took, is lost, where the software translator
     refuses it and its reporter resends it; notices go to
     tracked reporters with an ACK session only. The meter is off until
     the control plane turns it on (flow_cfg's default).
   - Immediate reports are written as plain WRITEs (no ImmDt, no
 *     notification); the software translator writes them with immediate.
 *   - Atomics are not windowed: the software translator keeps FETCH_ADDs
 *     within the collector's responder resources (max_dest_rd_atomic); a
 *     Tofino has no cheap way to count answers per collector, so the
 *     collector's QP must allow as many outstanding atomics as the report
 *     rate needs.
 *   - PSN: one register cell per collector, read and incremented by every
 *     RDMA packet in egress (its low 24 bits are the PSN). Every 64th PSN
 *     asks for an ACK, like the software translator (ack_phase counts the
 *     period). A NAK (PSN sequence error) from the collector is sent to
 *     the collector's egress pipe and writes the PSN it names into both
 *     registers; the control plane can write them too
 *     (Translator.Script's psn initial value).
 *   - Reporter flow control: for retransmittable reports, a register per
 *     reporter holds the next expected sequence number. A report with it is
 *     translated (and, when the reporter asks for ACKs, every 16th is
 *     mirrored back as a cumulative ACK); an older one is a duplicate and
 *     is answered with a cumulative ACK of the last number taken instead
 *     of being written again; a newer one means reports were lost and is
 *     answered with a NACK of the expected number, which the reporter
 *     resends from (translator/dtatranslator's SeqTracker, with two differences: the
 *     control plane sets the first expected number instead of the first
 *     report, and every report after a gap draws a NACK, with no interval
 *     between repeated NACKs). A report the software translator could not
 *     parse (an opcode neither knows, N outside 1..8) moves no sequence
 *     number, as there. The answers are the software translator's
 *     datagrams (from UDP 40044, DF, ID 0, DSCP 0, TTL 64, with the UDP
 *     checksum, except a mirrored ACK's, which is 0: computed in the egress
 *     deparser it costs a twelfth egress stage); a Tofino cannot cut a
 *     frame, so the report's bytes the parser did not take stay behind
 *     the datagram, where receivers see link padding. Compiled with
 *     -DDTA_NO_SEQNUM, the base header is the 2-byte form and there is no
 *     tracking.
 *
 * Builds make p4check compiles besides the default (see the README's
 * table):
 *   p4check: build -DDTA_NO_SEQNUM
 *   p4check: build -DDTA_APPEND_BATCH=1
 *   p4check: build -DDTA_APPEND_BATCH=2
 *   p4check: build -DDTA_SKETCH_MERGE -DDTA_NO_SEQNUM -DDTA_NO_METER
 *   p4check: build -DDTA_SKETCH_MERGE tofino2 nofit=tofino1
 * P4Testgen's STF tests, which cannot set registers, follow the
 * -DP4TESTGEN harness's copies (its ports, below: paths that need no
 * register) and the PTF tests, which set them, the switch's other ports
 * (with the harness's ports in one set, P4Testgen's greedy search spent
 * most tests on the copies' paths and left more statements unreached):
 *   p4check: tests STF 300
 *   p4check: tests PTF 300
 *   p4check: ports STF 100:101
 *   p4check: ports PTF 0:99,102:511
 */
#include <core.p4>
#include <tna.p4>

/* Append's batch B, the entries of one RDMA WRITE: 4 (the default, the
 * software translator's), 2 or 1, fixed when the program is compiled
 * (headers have fixed sizes). With B > 1 the ingress gathers a list's
 * entries in registers (batch_fill, batch_data0..B-2) and lets the report
 * carrying the B-th through, with the others in a bridged header; the
 * egress writes the B entries with one WRITE. The control plane's
 * Translator.AppendBatch names the build. */
#ifndef DTA_APPEND_BATCH
#define DTA_APPEND_BATCH 4
#endif
#if DTA_APPEND_BATCH != 1 && DTA_APPEND_BATCH != 2 && DTA_APPEND_BATCH != 4
#error "DTA_APPEND_BATCH is 1, 2 or 4"
#endif
/* The initial sequence registers of a list (see list_seq): with B > 1 the
 * sequences of the entries of the batch before the first, 2^32 - B + i,
 * so that the first batch's are 1..B; 0 for the single entry's. */
#if DTA_APPEND_BATCH == 1
#define SEQ_START0 0
#else
#define SEQ_START0 (32w0 - DTA_APPEND_BATCH)
#define SEQ_START1 (32w0 - DTA_APPEND_BATCH + 1)
#define SEQ_START2 (32w0 - DTA_APPEND_BATCH + 2)
#define SEQ_START3 (32w0 - DTA_APPEND_BATCH + 3)
#endif

/* The replication id of an egress packet: a multicast copy's, 0 for a
 * unicast packet. P4Testgen's Tofino model misreads the whole egress of a
 * program that reads egress_rid (it makes the field one bit wide; see
 * p4/internal/stf/testdata/egress_rid), and it follows no multicast copy
 * into egress, only unicast packets, whose replication id is 0. make
 * p4check generates the tests with -DP4TESTGEN, which reads the id from
 * the bridged header instead: 0, but for the copies the test harness
 * below makes (TESTGEN_COPY_PORT); the switch builds read the field. */
#ifdef P4TESTGEN
#define EGRESS_RID(eg_md) (8w0 ++ hdr.bridge.testgen_rid)
#else
#define EGRESS_RID(eg_md) eg_md.egress_rid
#endif

/* A report the switch CPU sends back in (flow control) skips the
 * sequence check: it passed it the first time. P4Testgen's tests, whose
 * reports are all green (see the meter), never come from the CPU. */
#if defined(DTA_NO_METER) || defined(P4TESTGEN)
#define NOT_RESENT true
#else
#define NOT_RESENT (md.resent == 0)
#endif

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<8>  coll_idx_t;
typedef bit<16> list_idx_t;
typedef bit<8>  reporter_idx_t;
typedef bit<12> cache_idx_t;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> ROCE_UDP_PORT  = 4791;
const bit<16> DTA_PORT       = 40040;
const bit<16> DTA_ACK_PORT   = 40044;

/* DTA primitives (translator/dtatranslator Opcode). */
const bit<8> OP_KEY_WRITE     = 0x01;
const bit<8> OP_APPEND        = 0x02;
const bit<8> OP_KEY_INCREMENT = 0x03;
const bit<8> OP_POSTCARDER    = 0x04;
const bit<8> OP_SKETCH_MERGE  = 0x05;
/* The largest N the software translator parses (dtawire.MaxRedundancy):
 * a report beyond it is malformed, one beyond MAX_REDUNDANCY refused. */
const bit<32> PARSED_REDUNDANCY = 8;

/* RoCEv2 RC opcodes and the AETH syndrome of a PSN sequence error NAK. */
const bit<8> RC_WRITE_ONLY = 0x0a;
const bit<8> RC_ACK        = 0x11;
const bit<8> RC_ATOMIC_ACK = 0x12;
const bit<8> RC_FETCH_ADD  = 0x14;
const bit<8> AETH_NAK_PSN_SEQ = 0x60;

/* What ingress hands to egress: a forwarded packet, a report to
 * translate, a NAK to resynchronise a PSN with, or (mirrored) an ACK. */
const bit<8> PKT_FORWARD = 0;
const bit<8> PKT_REPORT  = 1;
const bit<8> PKT_RESYNC  = 2;
const bit<8> PKT_ACK     = 3;
#if DTA_APPEND_BATCH > 1
/* A report completing an Append batch: the batch's other entries follow
 * the bridge header. */
const bit<8> PKT_BATCH   = 4;
#endif
const MirrorType_t MIRROR_ACK = 1;

/* Sizes; p4/dtatofino's Go control plane checks a program against the same
 * numbers. */
const bit<32> COLLECTOR_SLOTS = 64;
const bit<32> MAX_REDUNDANCY  = 4;
const bit<32> GROUP_SLOTS     = 256;  /* COLLECTOR_SLOTS x MAX_REDUNDANCY */
const bit<32> LIST_SLOTS      = 1024;
#ifndef DTA_NO_SEQNUM
const bit<32> REPORTER_SLOTS  = 256;
#endif
const bit<32> POSTCARD_HOPS   = 5;
const bit<32> POSTCARD_CACHE  = 4096;
const bit<32> FWD_SIZE        = 1024;
const bit<32> OPCODE_SLOTS    = 256;
const bit<32> DROP_SLOTS      = 8;
const bit<32> POSTCARD_EVENTS = 3;
/* A merged sketch column is written as an 8-byte entry. */
#ifdef DTA_SKETCH_MERGE
#define WRITE8_SKETCH hdr.sketch_col.isValid()
#else
#define WRITE8_SKETCH false
#endif
#ifdef DTA_SKETCH_MERGE
/* Sketch-Merge: sketches, (sketch, reporter) pairs and merged columns
 * over all sketches; a column has SKETCH_ROWS counters. */
const bit<32> SKETCH_SLOTS          = 64;
const bit<32> SKETCH_REPORTER_SLOTS = 1024;
const bit<32> SKETCH_CELLS          = 4096;
const bit<8>  SKETCH_ROWS           = 2;
const bit<8>  SKETCH_COUNT_MIN      = 0;
const bit<8>  SKETCH_HYPERLOGLOG    = 1;
const bit<32> SKETCH_EVENTS         = 4;
/* sketch_events index. */
const bit<2> SK_HELD     = 0; /* merged, the column waits for other reporters */
const bit<2> SK_COMPLETE = 1; /* the column's last reporter: written */
const bit<2> SK_ORDER    = 2; /* not the reporter's expected column */
const bit<2> SK_AHEAD    = 3; /* the reporter is a round ahead */
#endif

/* POSTCARD_HOPS bits. */
const bit<32> POSTCARD_FULL = 0x1f;

/* Reasons a report is not translated (drop_reports index). */
const bit<3> DROP_NO_TARGET = 0; /* no group, list or region for it */
#ifndef DTA_NO_SEQNUM
const bit<3> DROP_NACK      = 1; /* answered with a NACK */
const bit<3> DROP_DUPLICATE = 2; /* answered with an ACK, not rewritten */
#endif
const bit<3> DROP_UNKNOWN   = 3; /* opcode not translated here */
#ifndef DTA_NO_METER
const bit<3> DROP_METERED   = 4; /* low priority over the meter: dropped */
const bit<3> DROP_TO_CPU    = 5; /* high priority over the meter: to the CPU */
#ifndef DTA_NO_SEQNUM
/* The congestion notice's bit in the answer's second byte (the 7 bits
 * after the NACK bit): dtawire's ackCongested, 0x40. */
const bit<7> ACK_CONGESTED  = 0x40;
#endif
#endif

/* postcard_events index (an eviction is counted apart, in
 * postcard_evictions: the postcard that evicts is also held). */
const bit<2> PC_HELD     = 0;
const bit<2> PC_COMPLETE = 1;
const bit<2> PC_BAD_HOP  = 2;

/* Lengths of what the translator sends (IPv4 total, UDP): headers
 * 20 + 8 + BTH 12 + RETH 16 or AtomicETH 28 + payload + ICRC 4. */
const bit<16> IP_LEN_WRITE8   = 68;
const bit<16> UDP_LEN_WRITE8  = 48;
const bit<16> IP_LEN_ATOMIC   = 72;
const bit<16> UDP_LEN_ATOMIC  = 52;
const bit<16> IP_LEN_RECORD   = 88;
const bit<16> UDP_LEN_RECORD  = 68;
const bit<32> RECORD_LEN      = 28; /* 8 + 4 x POSTCARD_HOPS */
const bit<16> IP_LEN_ACK      = 30;
const bit<16> UDP_LEN_ACK     = 10;
#if DTA_APPEND_BATCH > 1
/* An Append batch's WRITE: B entries of 8 bytes. */
const bit<32> BATCH_LEN       = 8 * DTA_APPEND_BATCH;
const bit<16> IP_LEN_BATCH    = 60 + 8 * DTA_APPEND_BATCH;
const bit<16> UDP_LEN_BATCH   = 40 + 8 * DTA_APPEND_BATCH;
#endif

/*************************************************************************
 * Headers
 *************************************************************************/

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_h {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* DTA base header: 3 bytes, or 2 without the sequence number. */
header dta_base_h {
    bit<8> opcode;
#ifndef DTA_NO_SEQNUM
    bit<8> seqnum;
#endif
    bit<1> immediate;
    bit<1> retransmittable;
    bit<6> reserved;
}

header dta_key_write_h {
    bit<8>  redundancy;
    bit<32> key;
    bit<32> data;
}

header dta_append_h {
    bit<32> list_id;
    bit<32> data;
}

header dta_key_increment_h {
    bit<8>  redundancy;
    bit<32> key;
    bit<64> counter;
}

header dta_postcard_h {
    bit<32> key;
    bit<8>  hop;
    bit<32> data;
}

#ifdef DTA_SKETCH_MERGE
/* Sketch-Merge (our own format, internal/dtawire): one column of a
 * reporter's sketch. */
header dta_sketch_h {
    bit<16> sketch_id;
    bit<16> reporter_id;
    bit<32> column;
    bit<8>  kind;
    bit<8>  count;
}

/* The column's SKETCH_ROWS counters: the report's, then (ingress, on
 * the column's last report) the merged ones, which the egress writes as
 * an 8-byte entry. */
header sketch_col_h {
    bit<32> c0;
    bit<32> c1;
}
#endif

/* DTA ACK/NACK to a reporter (UDP 40044). */
header dta_ack_h {
    bit<8> seqnum;
    bit<1> nack;
    bit<7> reserved;
}

header bth_h {
    bit<8>  opcode;
    bit<1>  solicited;
    bit<1>  mig_req;
    bit<2>  pad_count;
    bit<4>  tver;
    bit<16> pkey;
    bit<8>  resv8;
    bit<24> dst_qp;
    bit<1>  ack_req;
    bit<7>  resv7;
    bit<24> psn;
}

header aeth_h {
    bit<8>  syndrome;
    bit<24> msn;
}

header reth_h {
    bit<32> va_hi;
    bit<32> va_lo;
    bit<32> rkey;
    bit<32> dma_len;
}

header atomic_eth_h {
    bit<32> va_hi;
    bit<32> va_lo;
    bit<32> rkey;
    bit<64> swap_add;
    bit<64> compare;
}

/* An 8-byte WRITE payload: Key-Write {CRC32(key), data}, Append {data,
 * sequence}. */
header entry_h {
    bit<32> word0;
    bit<32> word1;
}

#if DTA_APPEND_BATCH > 1
/* Ingress -> egress with a report that completes an Append batch: the
 * data of the batch's entries before it, from the gathering registers. */
header gathered_h {
    bit<32> d0;
#if DTA_APPEND_BATCH > 2
    bit<32> d1;
    bit<32> d2;
#endif
}

/* An Append batch's WRITE payload: B {data, sequence} entries. */
header entries_h {
    bit<32> d0;
    bit<32> s0;
    bit<32> d1;
    bit<32> s1;
#if DTA_APPEND_BATCH > 2
    bit<32> d2;
    bit<32> s2;
    bit<32> d3;
    bit<32> s3;
#endif
}
#endif

/* A postcard record: {CRC32(key), hop bitmap, data of hop 0..4}. */
header record_h {
    bit<32> checksum;
    bit<32> mask;
    bit<32> hop0;
    bit<32> hop1;
    bit<32> hop2;
    bit<32> hop3;
    bit<32> hop4;
}

/* The ICRC, little-endian: b0 is its least significant byte. */
header icrc_h {
    bit<8> b0;
    bit<8> b1;
    bit<8> b2;
    bit<8> b3;
}

/* Ingress -> egress with every packet. */
header bridge_h {
    bit<8>     pkt_type;
    coll_idx_t collector;
    list_idx_t list;
#ifdef P4TESTGEN
    bit<8>     testgen_rid; /* the harness's replication id (EGRESS_RID) */
#endif
}

/* Prepended to the mirrored copy that becomes an ACK. */
header ack_mirror_h {
    bit<8> pkt_type; /* PKT_ACK */
    bit<8> seqnum;
#ifndef DTA_NO_METER
    bit<8> flags;    /* ACK_CONGESTED for a congestion notice */
#endif
}

#ifdef P4TESTGEN
/* P4Testgen follows neither a mirrored nor a multicast copy into egress,
 * so the ACK rewrite (the egress path of a mirrored report) and the
 * Key-Write and Key-Increment WRITEs and FETCH_ADDs (the egress paths of
 * the copies redundancy_group's groups make) are beyond its tests. make
 * p4check generates them from -DP4TESTGEN builds, where two ports stand
 * for the traffic manager:
 *   - a packet arriving on TESTGEN_ACK_PORT starts with the ack_mirror_h
 *     the ingress deparser prepends to the copy, and ingress hands it to
 *     egress as the mirror session would (back out of the port it came
 *     in by), only if it is a copy the ingress writes: an in-order ACK
 *     (the -DP4TESTGEN build sees every report green, so no congestion
 *     notice) of a retransmittable report whose number ends in 15;
 *   - a packet arriving on TESTGEN_COPY_PORT starts with one byte, the
 *     replication id r of the copy the test follows, then a Key-Write or
 *     Key-Increment report (it drops any other packet); the report goes
 *     through the ingress as on any other port, and where a group
 *     would replicate it the copy r of the group (N nodes on the
 *     collector's port with ids 0..N-1, as the control plane makes them:
 *     none for r >= N or group 0) goes to egress with r as its
 *     replication id.
 * Switch builds have neither. */
const PortId_t TESTGEN_ACK_PORT  = 100;
const PortId_t TESTGEN_COPY_PORT = 101;

header testgen_copy_h {
    bit<8> rid;
}
#endif

struct headers_t {
#ifdef P4TESTGEN
    ack_mirror_h        testgen_ack;
    testgen_copy_h      testgen_copy;
#endif
    bridge_h            bridge;
#if DTA_APPEND_BATCH > 1
    gathered_h          gathered;
#endif
    ethernet_h          ethernet;
    ipv4_h              ipv4;
    udp_h               udp;
    dta_base_h          dta;
    dta_key_write_h     key_write;
    dta_append_h        append;
    dta_key_increment_h key_increment;
    dta_postcard_h      postcard;
#ifdef DTA_SKETCH_MERGE
    dta_sketch_h        sketch;
    sketch_col_h        sketch_col;
#endif
    dta_ack_h           ack;
    bth_h               bth;
    aeth_h              aeth;
    reth_h              reth;
    atomic_eth_h        atomic_eth;
    entry_h             entry;
    record_h            record;
    icrc_h              icrc;
}

struct ig_metadata_t {
    coll_idx_t     collector;
    PortId_t       port;
    bit<8>         redundancy;
    reporter_idx_t reporter;
    MirrorId_t     ack_session;
    bit<8>         expected;
    bit<8>         seq_diff;
    bit<1>         bounced;
    bit<1>         is_report;
    bit<1>         is_answer;
    bit<1>         refused;
    bit<1>         malformed;
    bit<3>         reason;
#if DTA_APPEND_BATCH > 1
    bit<8>         fill;
#endif
#ifndef DTA_NO_METER
    bit<1>         metered;
    bit<1>         high;
    bit<1>         resent;
    bit<8>         color;
    PortId_t       cpu_port;
    QueueId_t      cpu_qid;
#ifndef DTA_NO_SEQNUM
    bit<16>        tick;
    bit<16>        notice_old;
    bit<16>        notice_diff;
#endif
#endif
#ifdef DTA_SKETCH_MERGE
    bit<1>         sk_found;
    bit<1>         sk_member;
    bit<16>        sk_last;
    bit<16>        sk_column;
    bit<16>        sk_slot;
    bit<16>        sk_bit;
    bit<16>        sk_rest;
    bit<8>         sk_kind;
    bit<16>        sk_cell;
    bit<16>        sk_want;
    bit<16>        sk_old;
    bit<16>        sk_ahead;
    bit<2>         sk_event;
    bit<32>        sk_o0;
    bit<32>        sk_o1;
#endif
    ack_mirror_h   ack_mirror;
#ifdef P4TESTGEN
    MulticastGroupId_t testgen_mgid;
#endif
}

struct eg_headers_t {
    ack_mirror_h        ack_mirror;
    bridge_h            bridge;
#if DTA_APPEND_BATCH > 1
    gathered_h          gathered;
#endif
    ethernet_h          ethernet;
    ipv4_h              ipv4;
    udp_h               udp;
    dta_base_h          dta;
    dta_key_write_h     key_write;
    dta_append_h        append;
    dta_key_increment_h key_increment;
    dta_postcard_h      postcard;
#ifdef DTA_SKETCH_MERGE
    dta_sketch_h        sketch;
    sketch_col_h        sketch_col;
#endif
    dta_ack_h           ack;
    bth_h               bth;
    aeth_h              aeth;
    reth_h              reth;
    atomic_eth_h        atomic_eth;
    entry_h             entry;
#if DTA_APPEND_BATCH > 1
    entries_h           entries;
#endif
    record_h            record;
    icrc_h              icrc;
}

struct eg_metadata_t {
    bit<32>     key;
    bit<32>     checksum;
    bit<32>     slot;
    bit<32>     slot_mask;
    bit<32>     base_lo;
    bit<32>     offset;
    bit<32>     off_hi;
    bit<32>     off_lo;
    bit<32>     va_lo;
    bit<32>     psn;
    bit<8>      ack;
    bit<6>      phase;
    bit<32>     head;
    bit<32>     seq;
    cache_idx_t cache;
    bit<32>     old_key;
    bit<8>      old_mask;
    bit<8>      hop_bit;
    bit<8>      hop_rest;
    bit<1>      hop_ok;
    bit<1>      pc_region;
    bit<1>      emit;
    bit<1>      send;
    /* A report or a mirrored ACK: the egress rewrites its IPv4 header
     * (set by the parser, from the bridged packet type). */
    bit<1>      rewrite;
    bit<32>     h0;
    bit<32>     h1;
    bit<32>     h2;
    bit<32>     h3;
    bit<32>     h4;
    bit<32>     icrc_write8;
    bit<32>     icrc_atomic;
    bit<32>     icrc_record;
#if DTA_APPEND_BATCH > 1
    bit<32>     icrc_batch;
    bit<32>     seq1;
#if DTA_APPEND_BATCH > 2
    bit<32>     seq2;
    bit<32>     seq3;
#endif
#endif
}

/*************************************************************************
 * Ingress
 *************************************************************************/

parser IngressParser(packet_in pkt,
                     out headers_t hdr,
                     out ig_metadata_t md,
                     out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        md.collector = 0;
        md.port = 0;
        md.redundancy = 0;
        md.reporter = 0;
        md.ack_session = 0;
        md.expected = 0;
        md.seq_diff = 0;
        md.bounced = 0;
        md.is_report = 0;
        md.is_answer = 0;
        md.refused = 0;
        md.malformed = 0;
        md.reason = DROP_NO_TARGET;
#if DTA_APPEND_BATCH > 1
        md.fill = 0;
#endif
#ifdef DTA_SKETCH_MERGE
        md.sk_found = 0;
        md.sk_member = 0;
        md.sk_last = 0;
        md.sk_kind = 0;
        md.sk_column = 0;
        md.sk_slot = 0;
        md.sk_bit = 0;
        md.sk_rest = 0;
        md.sk_cell = 0;
        md.sk_want = 0;
        md.sk_old = 0;
        md.sk_ahead = 0;
        md.sk_event = SK_HELD;
        md.sk_o0 = 0;
        md.sk_o1 = 0;
#endif
#ifndef DTA_NO_METER
        md.metered = 0;
        md.high = 0;
        md.resent = 0;
        md.color = 0;
        md.cpu_port = 0;
        md.cpu_qid = 0;
#ifndef DTA_NO_SEQNUM
        md.tick = 0;
        md.notice_old = 0;
        md.notice_diff = 0;
#endif
#endif
#ifdef P4TESTGEN
        md.testgen_mgid = 0;
        transition select(ig_intr_md.ingress_port) {
            TESTGEN_ACK_PORT: parse_testgen_ack;
            TESTGEN_COPY_PORT: parse_testgen_copy;
            default: parse_ethernet;
        }
    }

    state parse_testgen_ack {
        pkt.extract(hdr.testgen_ack);
        transition parse_ethernet;
    }

    state parse_testgen_copy {
        pkt.extract(hdr.testgen_copy);
        transition parse_ethernet;
#else
        transition parse_ethernet;
#endif
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4_version;
            default: accept;
        }
    }

    /* A header of another IP version, or shorter than 20 bytes, is left
     * unparsed and the packet dropped like one of an unknown EtherType,
     * as hosts' decoders (and the Go twins') drop it. */
    state parse_ipv4_version {
        transition select(pkt.lookahead<bit<8>>()) {
            8w0x45 .. 8w0x4f: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            DTA_PORT: parse_dta;
            ROCE_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_dta {
        pkt.extract(hdr.dta);
        transition select(hdr.dta.opcode) {
            OP_KEY_WRITE: parse_key_write;
            OP_APPEND: parse_append;
            OP_KEY_INCREMENT: parse_key_increment;
            OP_POSTCARDER: parse_postcard;
#ifdef DTA_SKETCH_MERGE
            OP_SKETCH_MERGE: parse_sketch;
#endif
            default: accept;
        }
    }

#ifdef DTA_SKETCH_MERGE
    /* The counters only when there are SKETCH_ROWS of them: a sketch of
     * the switch has that many rows, and another count is refused. */
    state parse_sketch {
        pkt.extract(hdr.sketch);
        transition select(hdr.sketch.count) {
            SKETCH_ROWS: parse_sketch_col;
            default: accept;
        }
    }

    state parse_sketch_col {
        pkt.extract(hdr.sketch_col);
        transition accept;
    }
#endif

    state parse_key_write {
        pkt.extract(hdr.key_write);
        transition accept;
    }

    state parse_append {
        pkt.extract(hdr.append);
        transition accept;
    }

    state parse_key_increment {
        pkt.extract(hdr.key_increment);
        transition accept;
    }

    state parse_postcard {
        pkt.extract(hdr.postcard);
        transition accept;
    }

    /* The collector's answers: ACK and ATOMIC ACK carry an AETH. */
    state parse_bth {
        pkt.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            RC_ACK: parse_aeth;
            RC_ATOMIC_ACK: parse_aeth;
            default: accept;
        }
    }

    state parse_aeth {
        pkt.extract(hdr.aeth);
        transition accept;
    }
}

control Ingress(inout headers_t hdr,
                inout ig_metadata_t md,
                in ingress_intrinsic_metadata_t ig_intr_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* Reports received, by opcode; reports not translated, by reason. */
    Counter<bit<32>, bit<8>>(OPCODE_SLOTS, CounterType_t.PACKETS) report_pkts;
    Counter<bit<32>, bit<3>>(DROP_SLOTS, CounterType_t.PACKETS) drop_reports;

    action discard() {
        ig_dprsr_md.drop_ctl = 1;
    }

    /* ---- ordinary forwarding ------------------------------------------- */

    action forward(PortId_t port, mac_addr_t dmac, mac_addr_t smac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
    }

    table ipv4_fwd {
        key = { hdr.ipv4.dst_addr : lpm @name("dst_addr"); }
        actions = { forward; discard; }
        default_action = discard();
        size = FWD_SIZE;
    }

    /* ---- collectors ----------------------------------------------------- */

    /* The port is set as the unicast port only by the paths that unicast:
     * Key-Write and Key-Increment leave through their multicast group
     * alone. */
    action set_collector(coll_idx_t idx, PortId_t port) {
        md.collector = idx;
        md.port = port;
    }

    /* Reports go to a collector's address; the translator in front of it
     * takes them. */
    table collector {
        key = { hdr.ipv4.dst_addr : exact @name("dst_addr"); }
        actions = { set_collector; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLLECTOR_SLOTS;
    }

    /* The collector's RNIC answering the translator's queue pair. */
    table collector_qp {
        key = {
            hdr.ipv4.src_addr : exact @name("src_addr");
            hdr.bth.dst_qp    : exact @name("dst_qpn");
        }
        actions = { set_collector; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLLECTOR_SLOTS;
    }

    /* Key-Write and Key-Increment: (collector, N) -> the group that makes
     * N copies with replication ids 0..N-1 on the collector's port. */
    action set_group(MulticastGroupId_t mgid) {
        ig_tm_md.mcast_grp_a = mgid;
#ifdef P4TESTGEN
        md.testgen_mgid = mgid;
#endif
    }

    table redundancy_group {
        key = {
            md.collector : exact @name("collector");
            md.redundancy : exact @name("redundancy");
        }
        actions = { set_group; @defaultonly NoAction; }
        const default_action = NoAction();
        size = GROUP_SLOTS;
    }

    /* Append: (collector, list id) -> the list's registers and region. */
    action set_list(list_idx_t idx) {
        hdr.bridge.list = idx;
    }

    table append_list {
        key = {
            md.collector           : exact @name("collector");
            hdr.append.list_id     : exact @name("list_id");
        }
        actions = { set_list; @defaultonly NoAction; }
        const default_action = NoAction();
        size = LIST_SLOTS;
    }

#if DTA_APPEND_BATCH > 1
    /* Append batches, gathered in the ingress: per list, the place of the
     * next entry in the batch (0..B-1), and the data of the entries
     * before the last. The report that completes a batch goes on with
     * the others' data in a bridged header; the others end here. The
     * egress, in the collector's pipe, gives the batch its place in the
     * ring: reports of one list arriving on several ingress pipes make
     * batches of their own pipe's entries, each written whole. Nothing
     * flushes a batch that waits (the software translator writes it after
     * its flush timeout): a data plane has no timer, so a list's last
     * entries wait for the next ones. */
    Register<bit<8>, list_idx_t>(LIST_SLOTS, 0) batch_fill;
    RegisterAction<bit<8>, list_idx_t, bit<8>>(batch_fill) fill_next = {
        void apply(inout bit<8> value, out bit<8> rv) {
            rv = value;
            if (value == DTA_APPEND_BATCH - 1) {
                value = 0;
            } else {
                value = value + 1;
            }
        }
    };
    /* Entry i's data is kept when it is at place i, and read back by the
     * batch's last entry. */
    Register<bit<32>, list_idx_t>(LIST_SLOTS, 0) batch_data0;
    RegisterAction<bit<32>, list_idx_t, bit<32>>(batch_data0) gather0 = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (md.fill == 0) {
                value = hdr.append.data;
            }
            rv = value;
        }
    };
#if DTA_APPEND_BATCH > 2
    Register<bit<32>, list_idx_t>(LIST_SLOTS, 0) batch_data1;
    RegisterAction<bit<32>, list_idx_t, bit<32>>(batch_data1) gather1 = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (md.fill == 1) {
                value = hdr.append.data;
            }
            rv = value;
        }
    };
    Register<bit<32>, list_idx_t>(LIST_SLOTS, 0) batch_data2;
    RegisterAction<bit<32>, list_idx_t, bit<32>>(batch_data2) gather2 = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (md.fill == 2) {
                value = hdr.append.data;
            }
            rv = value;
        }
    };
#endif
    /* Entries gathered and waiting for their batch's last (a report
     * translated later, not dropped). */
    Counter<bit<32>, bit<1>>(1, CounterType_t.PACKETS) append_gathered;
#endif

#ifdef DTA_SKETCH_MERGE
    /* ---- Sketch-Merge ---------------------------------------------------- */

    /* The merge is the ingress's: the egress has no stage left. A
     * sketch's state is therefore per ingress pipe, and all the reporters
     * of one sketch must come in on one pipe. A reporter sends its
     * sketch's columns in order, round after round; a column is written
     * (one WRITE of its SKETCH_ROWS merged counters, at base + column x
     * 8) once every reporter has sent it this round, and starts the next
     * round empty, as translator/dtatranslator merges with a group of one
     * column. */

    /* (collector, sketch id) with the right kind and a column below the
     * sketch's (ternary: its high bits zero) -> the sketch's first cell
     * in the column registers (base) and its last column. A report of another
     * kind, or beyond the sketch, misses, as the software translator
     * refuses it. */
    action set_sketch(bit<16> base, bit<16> last) {
        md.sk_found = 1;
        md.sk_column = hdr.sketch.column[15:0];
        /* The column's cell in the column registers, here: computed
         * from md fields later, the compiler folds the add into the
         * registers' index, which a stateful ALU cannot take. */
        md.sk_cell = hdr.sketch.column[15:0] + base;
        md.sk_last = last;
        md.sk_kind = hdr.sketch.kind;
    }

    table sketch {
        key = {
            md.collector       : exact @name("collector");
            hdr.sketch.sketch_id : exact @name("sketch_id");
            hdr.sketch.kind    : exact @name("kind");
            hdr.sketch.column  : ternary @name("column");
        }
        actions = { set_sketch; @defaultonly NoAction; }
        const default_action = NoAction();
        size = SKETCH_SLOTS;
    }

    /* (collector, sketch id, reporter id) -> the reporter's cell in
     * sketch_next, its bit in a column's mask and every other reporter's
     * bits: a sketch has at most 16 reporters here (64 in software), so
     * that a gateway compares a mask with another (4 bytes at most). */
    action set_sketch_reporter(bit<16> slot, bit<16> bit_of, bit<16> rest) {
        md.sk_member = 1;
        md.sk_slot = slot;
        md.sk_bit = bit_of;
        md.sk_rest = rest;
    }

    table sketch_reporter {
        key = {
            md.collector             : exact @name("collector");
            hdr.sketch.sketch_id     : exact @name("sketch_id");
            hdr.sketch.reporter_id   : exact @name("reporter_id");
        }
        actions = { set_sketch_reporter; @defaultonly NoAction; }
        const default_action = NoAction();
        size = SKETCH_REPORTER_SLOTS;
    }

    /* Per (sketch, reporter): the column it sends next. It moves on (past
     * the last column to 0) only with that column; the old value comes
     * back. */
    Register<bit<16>, bit<16>>(SKETCH_REPORTER_SLOTS, 0) sketch_next;
    RegisterAction<bit<16>, bit<16>, bit<16>>(sketch_next) next_column = {
        void apply(inout bit<16> value, out bit<16> rv) {
            rv = value;
            if (value == md.sk_column) {
                if (value == md.sk_last) {
                    value = 0;
                } else {
                    value = value + 1;
                }
            }
        }
    };

    /* Per column: the reporters that sent it this round. The last one
     * clears it (as pc_mask_add does a postcard's bitmap); the bitmap
     * before the update comes back: the column is complete when it held
     * every other reporter, and a reporter whose bit is in it already is
     * a round ahead (the update left it as it was). */
    Register<bit<16>, bit<16>>(SKETCH_CELLS, 0) sketch_mask;
    RegisterAction<bit<16>, bit<16>, bit<16>>(sketch_mask) mask_add = {
        void apply(inout bit<16> value, out bit<16> rv) {
            rv = value;
            if (value == md.sk_rest) {
                value = 0;
            } else {
                value = value | md.sk_bit;
            }
        }
    };

    /* Per column, one register per row: the counters merged so far this
     * round. Count-Min sums, HyperLogLog keeps the largest; the column's
     * last report reads the merged counter out and clears the cell. A
     * stateful ALU outputs one kind of value on every branch, so the last
     * HyperLogLog report takes the register's value out (c<i>_take) and
     * an action keeps the larger (sketch_max), where the last Count-Min
     * report outputs the sum itself. */
    Register<bit<32>, bit<16>>(SKETCH_CELLS, 0) sketch_c0;
    RegisterAction<bit<32>, bit<16>, bit<32>>(sketch_c0) c0_sum = {
        void apply(inout bit<32> value) {
            value = value + hdr.sketch_col.c0;
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(sketch_c0) c0_sum_last = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value + hdr.sketch_col.c0;
            value = 0;
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(sketch_c0) c0_max = {
        void apply(inout bit<32> value) {
            if (hdr.sketch_col.c0 > value) {
                value = hdr.sketch_col.c0;
            }
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(sketch_c0) c0_take = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = 0;
        }
    };
    Register<bit<32>, bit<16>>(SKETCH_CELLS, 0) sketch_c1;
    RegisterAction<bit<32>, bit<16>, bit<32>>(sketch_c1) c1_sum = {
        void apply(inout bit<32> value) {
            value = value + hdr.sketch_col.c1;
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(sketch_c1) c1_sum_last = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value + hdr.sketch_col.c1;
            value = 0;
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(sketch_c1) c1_max = {
        void apply(inout bit<32> value) {
            if (hdr.sketch_col.c1 > value) {
                value = hdr.sketch_col.c1;
            }
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(sketch_c1) c1_take = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = 0;
        }
    };

    action sketch_max() {
        hdr.sketch_col.c0 = (md.sk_o0 > hdr.sketch_col.c0) ? md.sk_o0 : hdr.sketch_col.c0;
        hdr.sketch_col.c1 = (md.sk_o1 > hdr.sketch_col.c1) ? md.sk_o1 : hdr.sketch_col.c1;
    }

    /* The reporter's bit in the mask before the update (a round ahead),
     * in a table of its own: as a statement the compiler folds the AND
     * into the condition below, which a gateway cannot evaluate. */
    action sketch_and() {
        md.sk_ahead = md.sk_old & md.sk_bit;
    }

    table sketch_ahead {
        actions = { sketch_and; }
        const default_action = sketch_and();
        size = 1;
    }

    /* Sketch-Merge outcomes, by SK_* index. */
    Counter<bit<32>, bit<2>>(SKETCH_EVENTS, CounterType_t.PACKETS) sketch_events;
#endif

    /* ---- reporters and their sequence numbers ---------------------------- */

    /* The translator's MAC, the source of ACKs and NACKs. */
    mac_addr_t own_mac = 0;

    action set_translator(mac_addr_t mac) {
        own_mac = mac;
    }

    table translator_cfg {
        actions = { set_translator; }
        default_action = set_translator(0);
        size = 1;
    }

#ifndef DTA_NO_METER
    /* ---- the RDMA rate meter and the CPU queue ---------------------------- */

    /* A report's priority, as the software translator's: high when its
     * DSCP is at least the translator's high-dscp (the control plane
     * installs one entry per such DSCP). A report the switch CPU sends
     * back in, from its port, is high (only high-priority reports went
     * there) and resent: the sequence check took it the first time. */
    action set_priority(bit<1> high, bit<1> resent) {
        md.high = high;
        md.resent = resent;
    }

    table report_priority {
        key = {
            ig_intr_md.ingress_port : ternary @name("ingress_port");
            hdr.ipv4.dscp           : ternary @name("dscp");
        }
        actions = { set_priority; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 128;
    }

    /* Whether reports are metered (off until the control plane says
     * otherwise: every report is then green), and where a high-priority
     * report over the meter waits: the CPU port and one of its queues. */
    action set_flow(bit<1> metered, PortId_t cpu_port, QueueId_t cpu_qid) {
        md.metered = metered;
        md.cpu_port = cpu_port;
        md.cpu_qid = cpu_qid;
    }

    table flow_cfg {
        actions = { set_flow; }
        default_action = set_flow(0, 0, 0);
        size = 1;
    }

    /* Per collector, a two-rate three-colour meter in packets (reports)
     * the control plane sets with both rates and both bursts equal, so it
     * is one token bucket: green while a token is left, red beyond. A red
     * report takes no token, as the software translator's Meter.Take. */
    Meter<coll_idx_t>(COLLECTOR_SLOTS, MeterType_t.PACKETS) rdma_meter;
#endif

#ifndef DTA_NO_SEQNUM
    /* ack_session 0: no ACKs for in-order reports (NACKs still go back). */
    action set_reporter(reporter_idx_t idx, MirrorId_t ack_session) {
        md.reporter = idx;
        md.ack_session = ack_session;
    }

    table reporter {
        key = { hdr.ipv4.src_addr : exact @name("src_addr"); }
        actions = { set_reporter; @defaultonly NoAction; }
        const default_action = NoAction();
        size = REPORTER_SLOTS;
    }

    /* Per reporter, the next sequence number expected. It moves on only
     * with the expected report; the old value comes back. */
    Register<bit<8>, reporter_idx_t>(REPORTER_SLOTS, 0) expected_seq;
    RegisterAction<bit<8>, reporter_idx_t, bit<8>>(expected_seq) seq_check = {
        void apply(inout bit<8> value, out bit<8> rv) {
            rv = value;
            if (value == hdr.dta.seqnum) {
                value = value + 1;
            }
        }
    };

    /* The report's distance from the expected number, in a table of its
     * own: as a plain statement the compiler folds it into the conditions
     * below, which a gateway cannot evaluate. */
    action seq_diff() {
        md.seq_diff = hdr.dta.seqnum - md.expected;
    }

    table seq_delta {
        actions = { seq_diff; }
        const default_action = seq_diff();
        size = 1;
    }

#ifndef DTA_NO_METER
    /* A low-priority report over the meter is dropped and must be resent,
     * so it does not move the expected number on (the software
     * translator's Unaccept): the register is read, not advanced. */
    RegisterAction<bit<8>, reporter_idx_t, bit<8>>(expected_seq) seq_peek = {
        void apply(inout bit<8> value, out bit<8> rv) {
            rv = value;
        }
    };

    /* Congestion notices: at most one per reporter per tick (2^20 ns,
     * about the software translator's 1 ms NACK interval), the tick of
     * its last notice in notice_tick (swapped for the current one). */
    Register<bit<16>, reporter_idx_t>(REPORTER_SLOTS, 0) notice_tick;
    RegisterAction<bit<16>, reporter_idx_t, bit<16>>(notice_tick) notice_swap = {
        void apply(inout bit<16> value, out bit<16> rv) {
            rv = value;
            value = md.tick;
        }
    };

    /* In a table of its own, as seq_diff. */
    action notice_diff() {
        md.notice_diff = md.tick - md.notice_old;
    }

    table notice_delta {
        actions = { notice_diff; }
        const default_action = notice_diff();
        size = 1;
    }
#endif

    /* The report turns into the answer, back out of its ingress port, from
     * the address it was sent to. */
    action bounce(bit<8> seqnum, bit<1> nack) {
        hdr.ack.setValid();
        hdr.ack.seqnum = seqnum;
        hdr.ack.nack = nack;
        hdr.ack.reserved = 0;
        hdr.dta.setInvalid();
        hdr.key_write.setInvalid();
        hdr.append.setInvalid();
        hdr.key_increment.setInvalid();
        hdr.postcard.setInvalid();
#ifdef DTA_SKETCH_MERGE
        hdr.sketch.setInvalid();
        hdr.sketch_col.setInvalid();
#endif
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = own_mac;
        ipv4_addr_t to = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = to;
        hdr.ipv4.dscp = 0;
        hdr.ipv4.ecn = 0;
        hdr.ipv4.total_len = IP_LEN_ACK;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;
        hdr.ipv4.ttl = 64;
        hdr.udp.src_port = DTA_ACK_PORT;
        hdr.udp.dst_port = DTA_ACK_PORT;
        hdr.udp.length = UDP_LEN_ACK;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
        md.bounced = 1;
    }
#endif

    apply {
#ifdef P4TESTGEN
        if (hdr.testgen_ack.isValid()) {
            /* The test's mirrored ACK copy (see TESTGEN_ACK_PORT), back
             * out of the port it came in by, with no bridged header; one
             * the ingress could not have written is dropped. */
            ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
            if (hdr.testgen_ack.pkt_type != PKT_ACK || !hdr.dta.isValid() || hdr.dta.retransmittable == 0 ||
                hdr.testgen_ack.seqnum != hdr.dta.seqnum || hdr.dta.seqnum[3:0] != 15
#ifndef DTA_NO_METER
                || hdr.testgen_ack.flags != 0
#endif
                ) {
                discard();
            }
            exit;
        }
#endif
        hdr.bridge.setValid();
        hdr.bridge.pkt_type = PKT_FORWARD;
        hdr.bridge.collector = 0;
        hdr.bridge.list = 0;
#ifdef P4TESTGEN
        hdr.bridge.testgen_rid = 0;
        if (hdr.testgen_copy.isValid()) {
            /* Only groups replicate: the port takes Key-Write and
             * Key-Increment reports (any other traffic comes in by the
             * other ports). */
            hdr.bridge.testgen_rid = hdr.testgen_copy.rid;
            hdr.testgen_copy.setInvalid();
            if (!hdr.key_write.isValid() && !hdr.key_increment.isValid()) {
                discard();
                exit;
            }
        }
#endif
        translator_cfg.apply();
#ifndef DTA_NO_METER
        flow_cfg.apply();
#ifndef DTA_NO_SEQNUM
        md.tick = ig_prsr_md.global_tstamp[35:20];
#endif
#endif

        /* A table's hit can only be tested in an if of its own, so the
         * two lookups that tell reports and collector answers from other
         * traffic set flags first. */
        if (hdr.ipv4.isValid()) {
            if (hdr.dta.isValid()) {
                if (collector.apply().hit) {
                    md.is_report = 1;
                }
            } else if (hdr.aeth.isValid()) {
                if (collector_qp.apply().hit) {
                    md.is_answer = 1;
                }
            }
        }

        if (!hdr.ipv4.isValid()) {
            discard();
        } else if (md.is_report == 1) {
            report_pkts.count(hdr.dta.opcode);
            hdr.bridge.pkt_type = PKT_REPORT;
            hdr.bridge.collector = md.collector;
            if (hdr.key_write.isValid()) {
                md.redundancy = hdr.key_write.redundancy;
            } else if (hdr.key_increment.isValid()) {
                md.redundancy = hdr.key_increment.redundancy;
            }
#ifdef DTA_SKETCH_MERGE
            /* The sketch lookups first, beside the sequence check: the
             * merge after them is a chain of four stateful stages. Either
             * missing refuses the report (no sketch, another kind, a
             * column beyond it, a reporter it does not have). */
            if (hdr.sketch.isValid() && hdr.sketch_col.isValid()) {
                sketch.apply();
                sketch_reporter.apply();
            }
#endif
            /* A report the software translator cannot parse (an opcode
             * it does not know, N outside 1..PARSED_REDUNDANCY) moves no
             * sequence number there, nor here. */
            if (hdr.key_write.isValid() || hdr.key_increment.isValid()) {
                if (md.redundancy == 0 || (bit<32>)md.redundancy > PARSED_REDUNDANCY) {
                    md.malformed = 1;
                }
            } else if (!hdr.append.isValid() && !hdr.postcard.isValid() && hdr.dta.opcode != OP_SKETCH_MERGE) {
                md.malformed = 1;
            }
#ifdef DTA_SKETCH_MERGE
            /* A kind it does not know, or no counters. */
            if (hdr.sketch.isValid()) {
                if (hdr.sketch.kind > SKETCH_HYPERLOGLOG || hdr.sketch.count == 0) {
                    md.malformed = 1;
                }
            }
#endif
#ifndef DTA_NO_METER
            /* Every report the software translator parses is metered
             * (a duplicate or a gap too, here: the meter runs beside the
             * sequence check, which then knows the colour). */
            report_priority.apply();
            if (md.malformed == 0 && md.metered == 1) {
                md.color = rdma_meter.execute(md.collector);
            }
#ifdef P4TESTGEN
            /* P4Testgen taints a meter's colour and does not follow a
             * branch on a tainted value: every report path would end
             * here. Its tests see every report green. */
            md.color = 0;
#endif
#endif
#ifndef DTA_NO_SEQNUM
            if (hdr.dta.retransmittable == 1 && md.malformed == 0 && NOT_RESENT) {
                if (reporter.apply().hit) {
#ifndef DTA_NO_METER
                    if (md.color != 0 && md.high == 0) {
                        md.expected = seq_peek.execute(md.reporter);
                    } else {
                        md.expected = seq_check.execute(md.reporter);
                    }
                    if (md.color != 0 && md.ack_session != 0) {
                        md.notice_old = notice_swap.execute(md.reporter);
                    }
                    notice_delta.apply();
#else
                    md.expected = seq_check.execute(md.reporter);
#endif
                    seq_delta.apply();
                    if (md.seq_diff == 0) {
                        /* A cumulative ACK every 16th report, as the
                         * software translator's AckEvery default. */
#ifndef DTA_NO_METER
                        /* Not for a report dropped by the meter; a
                         * congestion notice otherwise, when the
                         * reporter's last one is a tick old (an ACK due
                         * goes first: the notice waits for the next red
                         * report). */
                        if (md.ack_session != 0 && hdr.dta.seqnum[3:0] == 15 && (md.color == 0 || md.high == 1)) {
                            ig_dprsr_md.mirror_type = MIRROR_ACK;
                            md.ack_mirror.setValid();
                            md.ack_mirror.pkt_type = PKT_ACK;
                            md.ack_mirror.seqnum = hdr.dta.seqnum;
                            md.ack_mirror.flags = 0;
                        } else if (md.color != 0 && md.ack_session != 0 && md.notice_diff != 0) {
                            ig_dprsr_md.mirror_type = MIRROR_ACK;
                            md.ack_mirror.setValid();
                            md.ack_mirror.pkt_type = PKT_ACK;
                            md.ack_mirror.seqnum = 0;
                            md.ack_mirror.flags = (bit<8>)ACK_CONGESTED;
                        }
#else
                        if (md.ack_session != 0 && hdr.dta.seqnum[3:0] == 15) {
                            ig_dprsr_md.mirror_type = MIRROR_ACK;
                            md.ack_mirror.setValid();
                            md.ack_mirror.pkt_type = PKT_ACK;
                            md.ack_mirror.seqnum = hdr.dta.seqnum;
                        }
#endif
                    } else if (md.seq_diff[7:7] == 1) {
                        /* Older than expected: it arrived before. The ACK
                         * names the last report taken (cumulative). */
                        md.reason = DROP_DUPLICATE;
                        bounce(md.expected - 1, 0);
                    } else {
                        md.reason = DROP_NACK;
                        bounce(md.expected, 1);
                    }
                }
            }
#endif
            if (md.bounced == 1) {
                hdr.bridge.pkt_type = PKT_FORWARD;
                drop_reports.count(md.reason);
#ifndef DTA_NO_METER
            } else if (md.color != 0) {
                /* Over the meter: a high-priority report waits in the
                 * CPU's queue, untranslated, for the switch CPU to send
                 * it back in (the software translator's queue); a
                 * low-priority one is dropped. Both are counted. */
                if (md.high == 1) {
                    hdr.bridge.pkt_type = PKT_FORWARD;
                    ig_tm_md.ucast_egress_port = md.cpu_port;
                    ig_tm_md.qid = md.cpu_qid;
                    md.reason = DROP_TO_CPU;
                } else {
                    md.reason = DROP_METERED;
                    discard();
                }
                drop_reports.count(md.reason);
#endif
            } else {
                if (hdr.key_write.isValid() || hdr.key_increment.isValid()) {
                    /* Groups exist for N = 1..MAX_REDUNDANCY only. */
                    if (md.redundancy == 0 || (bit<32>)md.redundancy > MAX_REDUNDANCY) {
                        md.refused = 1;
                    } else if (!redundancy_group.apply().hit) {
                        md.refused = 1;
                    }
#ifdef P4TESTGEN
                    /* The group's copy the test follows (see
                     * TESTGEN_COPY_PORT); without the harness P4Testgen
                     * makes none and sees the report dropped. */
                    if (md.refused == 0 && ig_intr_md.ingress_port == TESTGEN_COPY_PORT && md.testgen_mgid != 0 &&
                        hdr.bridge.testgen_rid < md.redundancy) {
                        ig_tm_md.ucast_egress_port = md.port;
                    }
#endif
                } else if (hdr.append.isValid()) {
                    ig_tm_md.ucast_egress_port = md.port;
                    if (!append_list.apply().hit) {
                        md.refused = 1;
                    }
                } else if (hdr.postcard.isValid()) {
                    ig_tm_md.ucast_egress_port = md.port;
#ifdef DTA_SKETCH_MERGE
                } else if (hdr.sketch.isValid() && hdr.sketch_col.isValid()) {
                    ig_tm_md.ucast_egress_port = md.port;
                    if (md.sk_found == 0 || md.sk_member == 0) {
                        md.refused = 1;
                    }
#endif
                } else {
                    md.reason = DROP_UNKNOWN;
                    md.refused = 1;
                }
                if (md.refused == 1) {
                    drop_reports.count(md.reason);
                    discard();
                }
#ifdef DTA_SKETCH_MERGE
                /* A column merged: in order, not a round ahead; the
                 * column's last report goes on to the egress with the
                 * merged counters in place of its own. */
                /* The lookups' flags rather than md.refused, which takes
                 * a stage of its own to compute. */
                if (md.sk_found == 1 && md.sk_member == 1 && hdr.sketch.isValid() && hdr.sketch_col.isValid()) {
                    md.sk_want = next_column.execute(md.sk_slot);
                    if (md.sk_want != md.sk_column) {
                        md.sk_event = SK_ORDER;
                    } else {
                        md.sk_old = mask_add.execute(md.sk_cell);
                        sketch_ahead.apply();
                        if (md.sk_ahead != 0) {
                            md.sk_event = SK_AHEAD;
                        } else if (md.sk_old == md.sk_rest) {
                            md.sk_event = SK_COMPLETE;
                            if (md.sk_kind == SKETCH_COUNT_MIN) {
                                hdr.sketch_col.c0 = c0_sum_last.execute(md.sk_cell);
                                hdr.sketch_col.c1 = c1_sum_last.execute(md.sk_cell);
                            } else {
                                md.sk_o0 = c0_take.execute(md.sk_cell);
                                md.sk_o1 = c1_take.execute(md.sk_cell);
                                sketch_max();
                            }
                        } else {
                            if (md.sk_kind == SKETCH_COUNT_MIN) {
                                c0_sum.execute(md.sk_cell);
                                c1_sum.execute(md.sk_cell);
                            } else {
                                c0_max.execute(md.sk_cell);
                                c1_max.execute(md.sk_cell);
                            }
                        }
                    }
                    sketch_events.count(md.sk_event);
                    if (md.sk_event != SK_COMPLETE) {
                        discard();
                    }
                }
#endif
#if DTA_APPEND_BATCH > 1
                /* A list's entry, gathered (md.refused is 0 when
                 * append_list hit). */
                if (md.refused == 0 && hdr.append.isValid()) {
                    hdr.gathered.setValid();
                    md.fill = fill_next.execute(hdr.bridge.list);
                    hdr.gathered.d0 = gather0.execute(hdr.bridge.list);
#if DTA_APPEND_BATCH > 2
                    hdr.gathered.d1 = gather1.execute(hdr.bridge.list);
                    hdr.gathered.d2 = gather2.execute(hdr.bridge.list);
#endif
                    if (md.fill == DTA_APPEND_BATCH - 1) {
                        hdr.bridge.pkt_type = PKT_BATCH;
                    } else {
                        append_gathered.count(0);
                        discard();
                    }
                }
#endif
            }
        } else if (md.is_answer == 1) {
            /* A NAK for a PSN sequence error resynchronises the PSN in
             * the collector's egress pipe; other answers end here. */
            if (hdr.bth.opcode == RC_ACK && hdr.aeth.syndrome == AETH_NAK_PSN_SEQ) {
                hdr.bridge.pkt_type = PKT_RESYNC;
                hdr.bridge.collector = md.collector;
                ig_tm_md.ucast_egress_port = md.port;
            } else {
                discard();
            }
        } else {
            ipv4_fwd.apply();
        }
    }
}

control IngressDeparser(packet_out pkt,
                        inout headers_t hdr,
                        in ig_metadata_t md,
                        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    /* Untyped: bf-p4c adds a Mirror() of its own to every ingress
     * deparser and rejects a typed one beside it ("Inconsistent mirror
     * selectors"); the type test below selects the session instead. */
    Mirror() mirror;
    Checksum() ipv4_csum;
    Checksum() udp_csum;

    apply {
        if (ig_dprsr_md.mirror_type == MIRROR_ACK) {
            mirror.emit<ack_mirror_h>(md.ack_session, md.ack_mirror);
        }
        /* Bounced ACKs and NACKs leave from here with new lengths, and
         * carry the UDP checksum the software translator's answers do
         * (pseudo-header, UDP header, the 2-byte DTA ACK). Only they: the
         * checksum unit sums the 20 bytes parsed, so a routed packet with
         * IP options would leave with a wrong checksum, and one that came
         * in corrupt would leave looking sound. */
        if (md.bounced == 1) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification,
                hdr.ipv4.flags, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
            hdr.udp.checksum = udp_csum.update({
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length,
                hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length,
                hdr.ack.seqnum, hdr.ack.nack, hdr.ack.reserved});
        }
        pkt.emit(hdr);
    }
}

/*************************************************************************
 * Egress
 *************************************************************************/

parser EgressParser(packet_in pkt,
                    out eg_headers_t hdr,
                    out eg_metadata_t md,
                    out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        md.key = 0;
        md.checksum = 0;
        md.slot = 0;
        md.slot_mask = 0;
        md.base_lo = 0;
        md.offset = 0;
        md.off_hi = 0;
        md.off_lo = 0;
        md.va_lo = 0;
        md.psn = 0;
        md.ack = 0;
        md.phase = 0;
        md.head = 0;
        md.seq = 0;
        md.cache = 0;
        md.old_key = 0;
        md.old_mask = 0;
        md.hop_bit = 0;
        md.hop_rest = 0;
        md.hop_ok = 0;
        md.pc_region = 0;
        md.emit = 0;
        md.send = 0;
        md.rewrite = 0;
        md.h0 = 0;
        md.h1 = 0;
        md.h2 = 0;
        md.h3 = 0;
        md.h4 = 0;
        md.icrc_write8 = 0;
        md.icrc_atomic = 0;
        md.icrc_record = 0;
#if DTA_APPEND_BATCH > 1
        md.icrc_batch = 0;
        md.seq1 = 0;
#if DTA_APPEND_BATCH > 2
        md.seq2 = 0;
        md.seq3 = 0;
#endif
#endif
        transition select(pkt.lookahead<bit<8>>()) {
            PKT_ACK: parse_ack_mirror;
            default: parse_bridge;
        }
    }

    state parse_ack_mirror {
        pkt.extract(hdr.ack_mirror);
        md.rewrite = 1;
        transition parse_ethernet;
    }

    state parse_bridge {
        pkt.extract(hdr.bridge);
        transition select(hdr.bridge.pkt_type) {
            PKT_REPORT: parse_report;
#if DTA_APPEND_BATCH > 1
            PKT_BATCH: parse_gathered;
#endif
            default: parse_ethernet;
        }
    }

    state parse_report {
        md.rewrite = 1;
        transition parse_ethernet;
    }

#if DTA_APPEND_BATCH > 1
    state parse_gathered {
        pkt.extract(hdr.gathered);
        md.rewrite = 1;
        transition parse_ethernet;
    }
#endif

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            DTA_PORT: parse_dta;
            ROCE_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_dta {
        pkt.extract(hdr.dta);
        transition select(hdr.dta.opcode) {
            OP_KEY_WRITE: parse_key_write;
            OP_APPEND: parse_append;
            OP_KEY_INCREMENT: parse_key_increment;
            OP_POSTCARDER: parse_postcard;
#ifdef DTA_SKETCH_MERGE
            OP_SKETCH_MERGE: parse_sketch;
#endif
            default: accept;
        }
    }

#ifdef DTA_SKETCH_MERGE
    /* The counters only when there are SKETCH_ROWS of them: a sketch of
     * the switch has that many rows, and another count is refused. */
    state parse_sketch {
        pkt.extract(hdr.sketch);
        transition select(hdr.sketch.count) {
            SKETCH_ROWS: parse_sketch_col;
            default: accept;
        }
    }

    state parse_sketch_col {
        pkt.extract(hdr.sketch_col);
        transition accept;
    }
#endif

    state parse_key_write {
        pkt.extract(hdr.key_write);
        transition accept;
    }

    state parse_append {
        pkt.extract(hdr.append);
        transition accept;
    }

    state parse_key_increment {
        pkt.extract(hdr.key_increment);
        transition accept;
    }

    state parse_postcard {
        pkt.extract(hdr.postcard);
        transition accept;
    }

    state parse_bth {
        pkt.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            RC_ACK: parse_aeth;
            RC_ATOMIC_ACK: parse_aeth;
            default: accept;
        }
    }

    state parse_aeth {
        pkt.extract(hdr.aeth);
        transition accept;
    }
}

control Egress(inout eg_headers_t hdr,
               inout eg_metadata_t md,
               in egress_intrinsic_metadata_t eg_intr_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    /* RDMA packets sent and PSN resynchronisations, by collector; postcard
     * outcomes, by PC_* index, and flows evicted from the postcard cache
     * before they completed (a second counter: one counter serves one
     * table per packet). */
    Counter<bit<32>, coll_idx_t>(COLLECTOR_SLOTS, CounterType_t.PACKETS_AND_BYTES) rdma_pkts;
    Counter<bit<32>, coll_idx_t>(COLLECTOR_SLOTS, CounterType_t.PACKETS) psn_resyncs;
    Counter<bit<32>, bit<2>>(POSTCARD_EVENTS, CounterType_t.PACKETS) postcard_events;
    Counter<bit<32>, bit<1>>(1, CounterType_t.PACKETS) postcard_evictions;

    /* ---- hashes ------------------------------------------------------------ */

    /* Slot n of a key: the polynomials of internal/dtamem/layout.go for
     * n = 0..3, in normal (MSB-first) form; reflected, init and xor all
     * ones, as Go's hash/crc32. */
    CRCPolynomial<bit<32>>(32w0x04c11db7, true, false, false, 32w0xffffffff, 32w0xffffffff) poly_slot0;
    CRCPolynomial<bit<32>>(32w0x1edc6f41, true, false, false, 32w0xffffffff, 32w0xffffffff) poly_slot1;
    CRCPolynomial<bit<32>>(32w0x741b8cd7, true, false, false, 32w0xffffffff, 32w0xffffffff) poly_slot2;
    CRCPolynomial<bit<32>>(32w0x814141ab, true, false, false, 32w0xffffffff, 32w0xffffffff) poly_slot3;
    /* CRC32(key), the checksum stored beside the data. */
    CRCPolynomial<bit<32>>(32w0x04c11db7, true, false, false, 32w0xffffffff, 32w0xffffffff) poly_checksum;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_slot0) slot0;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_slot1) slot1;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_slot2) slot2;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_slot3) slot3;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_checksum) key_checksum;
    /* The same CRC, whose low bits index the postcard cache. */
    CRCPolynomial<bit<32>>(32w0x04c11db7, true, false, false, 32w0xffffffff, 32w0xffffffff) poly_cache;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_cache) cache_index;

    /* The ICRC, one hash per packet shape over what varies from packet
     * to packet (see the top): the hash starts from the collector's
     * prefix state, which rdma_conn installs. Reflected, initial value 0
     * (the prefix is the state) and final xor all ones, as hash/crc32. */
    CRCPolynomial<bit<32>>(32w0x04c11db7, true, false, false, 32w0x00000000, 32w0xffffffff) poly_icrc;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_icrc) icrc_hash_write8;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_icrc) icrc_hash_atomic;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_icrc) icrc_hash_record;
#if DTA_APPEND_BATCH > 1
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_icrc) icrc_hash_batch;
#endif

    /* ---- the connection to each collector ----------------------------- */

    /* Per collector: the PSN of its next packet (low 24 bits). */
    Register<bit<32>, coll_idx_t>(COLLECTOR_SLOTS, 0) psn;
    RegisterAction<bit<32>, coll_idx_t, bit<32>>(psn) psn_next = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = value + 1;
        }
    };
    RegisterAction<bit<32>, coll_idx_t, bit<32>>(psn) psn_resync = {
        void apply(inout bit<32> value) {
            value = (bit<32>)hdr.bth.psn;
        }
    };

    /* Per collector: its last PSN's place in the period of 64 PSNs
     * that ask for an ACK, p mod 64 with 64 standing for 0 (0 for a
     * PSN just before one asking, as after a resync), so that bit 6 of
     * the next packet's value says whether it asks. The PSN register
     * cannot tell: a stateful ALU outputs its value, and testing its
     * low bits takes a stage after it, which the ICRC hash (that
     * covers the bit) would wait for. */
    Register<bit<8>, coll_idx_t>(COLLECTOR_SLOTS, 0) ack_phase;
    RegisterAction<bit<8>, coll_idx_t, bit<8>>(ack_phase) ack_next = {
        void apply(inout bit<8> value, out bit<8> rv) {
            if (value >= 64) {
                value = 1;
            } else {
                value = value + 1;
            }
            rv = value;
        }
    };
    RegisterAction<bit<8>, coll_idx_t, bit<8>>(ack_phase) ack_resync = {
        void apply(inout bit<8> value) {
            value = (bit<8>)md.phase;
        }
    };

    /* Ethernet, IPv4, UDP and BTH of the translator's RC connection to a
     * collector. */
    action set_conn(mac_addr_t dmac, mac_addr_t smac, ipv4_addr_t src_addr, ipv4_addr_t dst_addr,
                    bit<6> dscp, bit<16> udp_src_port, bit<24> dst_qpn,
                    bit<32> icrc_write8, bit<32> icrc_atomic, bit<32> icrc_record) {
        md.icrc_write8 = icrc_write8;
        md.icrc_atomic = icrc_atomic;
        md.icrc_record = icrc_record;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        hdr.ipv4.version = 4;
        hdr.ipv4.ihl = 5;
        hdr.ipv4.dscp = dscp;
        hdr.ipv4.ecn = 0;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;
        hdr.ipv4.frag_offset = 0;
        hdr.ipv4.ttl = 64;
        hdr.ipv4.protocol = IP_PROTO_UDP;
        hdr.ipv4.src_addr = src_addr;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.src_port = udp_src_port;
        hdr.udp.dst_port = ROCE_UDP_PORT;
        hdr.udp.checksum = 0;
        hdr.bth.setValid();
        hdr.bth.solicited = 0;
        hdr.bth.mig_req = 0;
        hdr.bth.pad_count = 0;
        hdr.bth.tver = 0;
        hdr.bth.pkey = 0xffff;
        hdr.bth.resv8 = 0;
        hdr.bth.dst_qp = dst_qpn;
        hdr.bth.resv7 = 0;
    }

    table rdma_conn {
        key = { hdr.bridge.collector : exact @name("collector"); }
        actions = { set_conn; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLLECTOR_SLOTS;
    }

    /* ---- collector memory ---------------------------------------------- */

    bit<32> va_hi = 0;
    bit<32> rkey_of = 0;

    /* A region: VA high half, low half, rkey, slots - 1 (entries - 1). */
    action set_region(bit<32> base_hi, bit<32> base_lo, bit<32> rkey, bit<32> slot_mask) {
        va_hi = base_hi;
        md.base_lo = base_lo;
        rkey_of = rkey;
        md.slot_mask = slot_mask;
    }

    table key_write_region {
        key = { hdr.bridge.collector : exact @name("collector"); }
        actions = { set_region; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLLECTOR_SLOTS;
    }

    table key_increment_region {
        key = { hdr.bridge.collector : exact @name("collector"); }
        actions = { set_region; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLLECTOR_SLOTS;
    }

    table postcard_region {
        key = { hdr.bridge.collector : exact @name("collector"); }
        actions = { set_region; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLLECTOR_SLOTS;
    }

    table list_region {
        key = { hdr.bridge.list : exact @name("list"); }
        actions = { set_region; @defaultonly NoAction; }
        const default_action = NoAction();
        size = LIST_SLOTS;
    }

    /* ---- Append ------------------------------------------------------- */

    /* Per list: entries written so far (the ring position of the next),
     * and the sequence of the last entry (from 1, skipping 0 on wrap, as
     * translator/dtatranslator numbers them). A batch of B entries moves
     * the head by B; list_seq and list_seq1..B-1 hold the sequences of
     * the last batch's entries 0..B-1, each moving on by B (past
     * 2^32 - 1 to 1: the sequence of position p is p mod (2^32 - 1) + 1),
     * so the egress reads B sequences at once, with no chain of adds. */
    Register<bit<32>, list_idx_t>(LIST_SLOTS, 0) list_head;
    RegisterAction<bit<32>, list_idx_t, bit<32>>(list_head) head_next = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = value + DTA_APPEND_BATCH;
        }
    };
    Register<bit<32>, list_idx_t>(LIST_SLOTS, SEQ_START0) list_seq;
#if DTA_APPEND_BATCH == 1
    RegisterAction<bit<32>, list_idx_t, bit<32>>(list_seq) seq_next = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (value == 0xffffffff) {
                value = 1;
            } else {
                value = value + 1;
            }
            rv = value;
        }
    };
#else
    /* The wrap test is value > 2^32 - 1 - B, unsigned; a stateful ALU
     * takes constants of 32 signed bits, so it reads the value as signed:
     * -B <= value < 0. */
    RegisterAction<bit<32>, list_idx_t, bit<32>>(list_seq) seq_next = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if ((int<32>)value < 0 && (int<32>)value >= -DTA_APPEND_BATCH) {
                value = value + (DTA_APPEND_BATCH + 1);
            } else {
                value = value + DTA_APPEND_BATCH;
            }
            rv = value;
        }
    };
    Register<bit<32>, list_idx_t>(LIST_SLOTS, SEQ_START1) list_seq1;
    RegisterAction<bit<32>, list_idx_t, bit<32>>(list_seq1) seq_next1 = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if ((int<32>)value < 0 && (int<32>)value >= -DTA_APPEND_BATCH) {
                value = value + (DTA_APPEND_BATCH + 1);
            } else {
                value = value + DTA_APPEND_BATCH;
            }
            rv = value;
        }
    };
#if DTA_APPEND_BATCH > 2
    Register<bit<32>, list_idx_t>(LIST_SLOTS, SEQ_START2) list_seq2;
    RegisterAction<bit<32>, list_idx_t, bit<32>>(list_seq2) seq_next2 = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if ((int<32>)value < 0 && (int<32>)value >= -DTA_APPEND_BATCH) {
                value = value + (DTA_APPEND_BATCH + 1);
            } else {
                value = value + DTA_APPEND_BATCH;
            }
            rv = value;
        }
    };
    Register<bit<32>, list_idx_t>(LIST_SLOTS, SEQ_START3) list_seq3;
    RegisterAction<bit<32>, list_idx_t, bit<32>>(list_seq3) seq_next3 = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if ((int<32>)value < 0 && (int<32>)value >= -DTA_APPEND_BATCH) {
                value = value + (DTA_APPEND_BATCH + 1);
            } else {
                value = value + DTA_APPEND_BATCH;
            }
            rv = value;
        }
    };
#endif

    /* The batch WRITE's ICRC prefix state for each collector (see
     * set_conn): its lengths are not an 8-byte entry's. */
    action set_batch_icrc(bit<32> icrc_batch) {
        md.icrc_batch = icrc_batch;
    }

    table batch_icrc {
        key = { hdr.bridge.collector : exact @name("collector"); }
        actions = { set_batch_icrc; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLLECTOR_SLOTS;
    }
#endif

#ifdef DTA_SKETCH_MERGE
    /* ---- Sketch-Merge --------------------------------------------------- */

    /* (collector, sketch id) -> the sketch's region, columns - 1 as the
     * slot mask. A merged column of SKETCH_ROWS (2) counters is an 8-byte
     * entry: the egress writes it as it writes a Key-Write entry, with
     * the same lengths and ICRC prefix state, and no stage of its own. */
    table sketch_region {
        key = {
            hdr.bridge.collector : exact @name("collector");
            hdr.sketch.sketch_id : exact @name("sketch_id");
        }
        actions = { set_region; @defaultonly NoAction; }
        const default_action = NoAction();
        size = SKETCH_SLOTS;
    }
#endif

    /* ---- Postcarder ----------------------------------------------------- */

    action hop(bit<8> bit_of, bit<8> rest) {
        md.hop_bit = bit_of;
        md.hop_rest = rest;
        md.hop_ok = 1;
    }

    action no_hop() {
        md.hop_ok = 0;
    }

    /* hop -> its bitmap bit and the bitmap of every other hop. */
    table hop_bits {
        key = { hdr.postcard.hop : exact @name("hop"); }
        actions = { hop; no_hop; }
        const default_action = no_hop();
        size = POSTCARD_HOPS;
        const entries = {
            0 : hop(0x01, 0x1e);
            1 : hop(0x02, 0x1d);
            2 : hop(0x04, 0x1b);
            3 : hop(0x08, 0x17);
            4 : hop(0x10, 0x0f);
        }
    }

    /* The flow cached at an index; the previous one comes back. */
    Register<bit<32>, cache_idx_t>(POSTCARD_CACHE, 0) pc_key;
    RegisterAction<bit<32>, cache_idx_t, bit<32>>(pc_key) pc_key_swap = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = md.key;
        }
    };

    /* The hops reported so far (POSTCARD_HOPS bits: a byte, which a
     * gateway compares with another). A new flow starts from its hop; the
     * last missing hop clears it, so the flow's next postcard starts a new
     * record. Both return the bitmap before the update (a stateful ALU
     * outputs one kind of value on every branch): the eviction count
     * tests it, and a known flow is complete when it was every other
     * hop's (the record's bitmap is then POSTCARD_FULL). */
    Register<bit<8>, cache_idx_t>(POSTCARD_CACHE, 0) pc_mask;
    RegisterAction<bit<8>, cache_idx_t, bit<8>>(pc_mask) pc_mask_new = {
        void apply(inout bit<8> value, out bit<8> rv) {
            rv = value;
            value = md.hop_bit;
        }
    };
    RegisterAction<bit<8>, cache_idx_t, bit<8>>(pc_mask) pc_mask_add = {
        void apply(inout bit<8> value, out bit<8> rv) {
            rv = value;
            if (value == md.hop_rest) {
                value = 0;
            } else {
                value = value | md.hop_bit;
            }
        }
    };

    Register<bit<32>, cache_idx_t>(POSTCARD_CACHE, 0) pc_hop0;
    RegisterAction<bit<32>, cache_idx_t, bit<32>>(pc_hop0) pc_hop0_update = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (hdr.postcard.hop == 0) {
                value = hdr.postcard.data;
            }
            rv = value;
        }
    };
    Register<bit<32>, cache_idx_t>(POSTCARD_CACHE, 0) pc_hop1;
    RegisterAction<bit<32>, cache_idx_t, bit<32>>(pc_hop1) pc_hop1_update = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (hdr.postcard.hop == 1) {
                value = hdr.postcard.data;
            }
            rv = value;
        }
    };
    Register<bit<32>, cache_idx_t>(POSTCARD_CACHE, 0) pc_hop2;
    RegisterAction<bit<32>, cache_idx_t, bit<32>>(pc_hop2) pc_hop2_update = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (hdr.postcard.hop == 2) {
                value = hdr.postcard.data;
            }
            rv = value;
        }
    };
    Register<bit<32>, cache_idx_t>(POSTCARD_CACHE, 0) pc_hop3;
    RegisterAction<bit<32>, cache_idx_t, bit<32>>(pc_hop3) pc_hop3_update = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (hdr.postcard.hop == 3) {
                value = hdr.postcard.data;
            }
            rv = value;
        }
    };
    Register<bit<32>, cache_idx_t>(POSTCARD_CACHE, 0) pc_hop4;
    RegisterAction<bit<32>, cache_idx_t, bit<32>>(pc_hop4) pc_hop4_update = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (hdr.postcard.hop == 4) {
                value = hdr.postcard.data;
            }
            rv = value;
        }
    };

    /* ---- packet shapes ----------------------------------------------------- */

    action drop_dta() {
        hdr.dta.setInvalid();
        hdr.key_write.setInvalid();
        hdr.append.setInvalid();
        hdr.key_increment.setInvalid();
        hdr.postcard.setInvalid();
#ifdef DTA_SKETCH_MERGE
        hdr.sketch.setInvalid();
        hdr.sketch_col.setInvalid();
#endif
    }

    action write8() {
        hdr.bth.opcode = RC_WRITE_ONLY;
        hdr.reth.setValid();
        hdr.reth.va_hi = va_hi;
        hdr.reth.va_lo = md.va_lo;
        hdr.reth.rkey = rkey_of;
        hdr.reth.dma_len = 8;
        hdr.ipv4.total_len = IP_LEN_WRITE8;
        hdr.udp.length = UDP_LEN_WRITE8;
    }

    apply {
        if (hdr.ack_mirror.isValid()) {
            /* A mirrored in-order report becomes its ACK. */
            hdr.ack.setValid();
            hdr.ack.seqnum = hdr.ack_mirror.seqnum;
            hdr.ack.nack = 0;
#ifndef DTA_NO_METER
            hdr.ack.reserved = hdr.ack_mirror.flags[6:0];
#else
            hdr.ack.reserved = 0;
#endif
            drop_dta();
            mac_addr_t to = hdr.ethernet.src_addr;
            hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
            hdr.ethernet.dst_addr = to;
            ipv4_addr_t back = hdr.ipv4.src_addr;
            hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
            hdr.ipv4.dst_addr = back;
            hdr.ipv4.dscp = 0;
            hdr.ipv4.ecn = 0;
            hdr.ipv4.total_len = IP_LEN_ACK;
            hdr.ipv4.identification = 0;
            hdr.ipv4.flags = 2;
            hdr.ipv4.ttl = 64;
            hdr.udp.src_port = DTA_ACK_PORT;
            hdr.udp.dst_port = DTA_ACK_PORT;
            hdr.udp.length = UDP_LEN_ACK;
            /* Unlike the bounced answers' (and the software
             * translator's), no UDP checksum: in the egress deparser it
             * costs the egress a twelfth stage. */
            hdr.udp.checksum = 0;
        } else if (hdr.bridge.pkt_type == PKT_RESYNC) {
            psn_resync.execute(hdr.bridge.collector);
            /* The PSN before the one the collector expects (6-bit
             * arithmetic: mod 64). */
            md.phase = hdr.bth.psn[5:0] - 1;
            ack_resync.execute(hdr.bridge.collector);
            psn_resyncs.count(hdr.bridge.collector);
            eg_dprsr_md.drop_ctl = 1;
#if DTA_APPEND_BATCH > 1
        } else if (hdr.bridge.pkt_type == PKT_REPORT || hdr.bridge.pkt_type == PKT_BATCH) {
#else
        } else if (hdr.bridge.pkt_type == PKT_REPORT) {
#endif
            bit<8> n = EGRESS_RID(eg_intr_md)[7:0];
            /* The connection's headers first, whether or not the report
             * ends in a packet (a held postcard is dropped below): the
             * PSN and the ICRC wait on nothing else. The hit alone in its
             * if, as Tofino wants it. */
            if (rdma_conn.apply().hit) {
                md.send = 1;
            }
#ifdef P4TESTGEN
            /* The control plane installs no connection with UDP source
             * port 0 (it derives one from the QPNs, as the software
             * translator does): the harness takes a test's such entry for
             * none, so that P4Testgen's tests send on connections the
             * software translator can have. */
            if (hdr.udp.src_port == 0) {
                md.send = 0;
            }
#endif
            /* A Key-Write or Key-Increment is written only to a
             * collector with the primitive's region, as the software
             * translator refuses it: the groups are per (collector, N),
             * so a collector with one of the two regions gets the other
             * primitive's reports too, which a WRITE or FETCH_ADD to VA 0
             * with rkey 0 would answer with a NAK that breaks the
             * connection. */
            if (hdr.key_write.isValid()) {
                md.key = hdr.key_write.key;
                if (key_write_region.apply().hit) {
                    md.emit = 1;
                }
            } else if (hdr.key_increment.isValid()) {
                md.key = hdr.key_increment.key;
                if (key_increment_region.apply().hit) {
                    md.emit = 1;
                }
            } else if (hdr.append.isValid()) {
                md.emit = 1;
                list_region.apply();
                /* The ring position takes the place of a hashed slot. */
                md.slot = head_next.execute(hdr.bridge.list);
                md.seq = seq_next.execute(hdr.bridge.list);
#if DTA_APPEND_BATCH > 1
                md.seq1 = seq_next1.execute(hdr.bridge.list);
#if DTA_APPEND_BATCH > 2
                md.seq2 = seq_next2.execute(hdr.bridge.list);
                md.seq3 = seq_next3.execute(hdr.bridge.list);
#endif
                batch_icrc.apply();
#endif
#ifdef DTA_SKETCH_MERGE
            } else if (hdr.sketch_col.isValid()) {
                /* A merged column (only the column's last report gets
                 * here); the column takes the place of a hashed slot
                 * below. */
                md.emit = 1;
                sketch_region.apply();
#endif
            } else if (hdr.postcard.isValid()) {
                md.key = hdr.postcard.key;
                /* The flow's cache index, the low bits of CRC32(key) (the
                 * software translator's), from a hash of its own so the
                 * cache is read without waiting for the checksum. */
                md.cache = cache_index.get({hdr.postcard.key})[11:0];
                n = 0;
                /* A collector without a postcard region gets no record
                 * (a WRITE to VA 0 with rkey 0 would draw a NAK that
                 * breaks the connection) and its postcards are not
                 * cached: the software translator refuses them. */
                if (postcard_region.apply().hit) {
                    md.pc_region = 1;
                }
                hop_bits.apply();
            }

            if (hdr.append.isValid()) {
                /* md.slot holds the list's head. */
            } else if (n == 0) {
                md.slot = slot0.get({md.key, 8w0});
            } else if (n == 1) {
                md.slot = slot1.get({md.key, 8w1});
            } else if (n == 2) {
                md.slot = slot2.get({md.key, 8w2});
            } else {
                md.slot = slot3.get({md.key, 8w3});
            }
            md.checksum = key_checksum.get({md.key});
            /* An 8-byte entry's words as soon as they are known, so the
             * ICRC hash does not wait for the header writes below. */
#if DTA_APPEND_BATCH > 1
            /* A batch: the gathered entries, then the report's own. */
            if (hdr.append.isValid()) {
                hdr.entries.setValid();
                hdr.entries.d0 = hdr.gathered.d0;
                hdr.entries.s0 = md.seq;
#if DTA_APPEND_BATCH > 2
                hdr.entries.d1 = hdr.gathered.d1;
                hdr.entries.s1 = md.seq1;
                hdr.entries.d2 = hdr.gathered.d2;
                hdr.entries.s2 = md.seq2;
                hdr.entries.d3 = hdr.append.data;
                hdr.entries.s3 = md.seq3;
#else
                hdr.entries.d1 = hdr.append.data;
                hdr.entries.s1 = md.seq1;
#endif
            } else
#endif
            if (hdr.key_write.isValid()) {
                hdr.entry.setValid();
                hdr.entry.word0 = md.checksum;
                hdr.entry.word1 = hdr.key_write.data;
            } else if (hdr.append.isValid()) {
                hdr.entry.setValid();
                hdr.entry.word0 = hdr.append.data;
                hdr.entry.word1 = md.seq;
#ifdef DTA_SKETCH_MERGE
            } else if (hdr.sketch_col.isValid()) {
                hdr.entry.setValid();
                hdr.entry.word0 = hdr.sketch_col.c0;
                hdr.entry.word1 = hdr.sketch_col.c1;
#endif
            }

            /* The entry's address, one ALU operation per step (an action
             * does one operation per field, and every step needs the one
             * before): slot within the region, times the entry size (8,
             * or 28 = 32 - 4 for a postcard record), plus the base. */
#ifdef DTA_SKETCH_MERGE
            /* A sketch's column in place of the slot hashed above (no
             * branch of its own in the hash's chain). */
            if (hdr.sketch_col.isValid()) {
                md.slot = hdr.sketch.column & md.slot_mask;
            } else
#endif
            if (md.emit == 1 || hdr.postcard.isValid()) {
                md.slot = md.slot & md.slot_mask;
            }
            if (hdr.postcard.isValid()) {
                md.off_hi = md.slot << 5;
                md.off_lo = md.slot << 2;
            } else {
                md.offset = md.slot << 3;
            }
            if (hdr.postcard.isValid()) {
                md.offset = md.off_hi - md.off_lo;
            }
            md.va_lo = md.base_lo + md.offset;

            if (hdr.postcard.isValid()) {
                if (md.hop_ok == 0 || md.pc_region == 0) {
                    /* Counted with the bad hops: the counter has no
                     * slot of its own for a missing region. */
                    postcard_events.count(PC_BAD_HOP);
                } else {
                    md.old_key = pc_key_swap.execute(md.cache);
                    md.h0 = pc_hop0_update.execute(md.cache);
                    md.h1 = pc_hop1_update.execute(md.cache);
                    md.h2 = pc_hop2_update.execute(md.cache);
                    md.h3 = pc_hop3_update.execute(md.cache);
                    md.h4 = pc_hop4_update.execute(md.cache);
                    if (md.old_key != md.key) {
                        /* A new flow: held (a record has several hops). */
                        md.old_mask = pc_mask_new.execute(md.cache);
                        if (md.old_mask != 0) {
                            postcard_evictions.count(0);
                        }
                        postcard_events.count(PC_HELD);
                    } else {
                        md.old_mask = pc_mask_add.execute(md.cache);
                        if (md.old_mask == md.hop_rest) {
                            postcard_events.count(PC_COMPLETE);
                            md.emit = 1;
                        } else {
                            postcard_events.count(PC_HELD);
                        }
                    }
                }
            }

            if (md.emit == 0 || md.send == 0) {
                eg_dprsr_md.drop_ctl = 1;
            } else {
                md.psn = psn_next.execute(hdr.bridge.collector);
                /* An ACK every 64 packets, as the software translator
                 * asks: PSNs that are multiples of 64. */
                md.ack = ack_next.execute(hdr.bridge.collector);
                hdr.bth.psn = md.psn[23:0];
                hdr.bth.ack_req = md.ack[6:6];
#if DTA_APPEND_BATCH > 1
                if (hdr.append.isValid()) {
                    hdr.bth.opcode = RC_WRITE_ONLY;
                    hdr.reth.setValid();
                    hdr.reth.va_hi = va_hi;
                    hdr.reth.va_lo = md.va_lo;
                    hdr.reth.rkey = rkey_of;
                    hdr.reth.dma_len = BATCH_LEN;
                    hdr.ipv4.total_len = IP_LEN_BATCH;
                    hdr.udp.length = UDP_LEN_BATCH;
                } else
#endif
                if (hdr.key_write.isValid() || hdr.append.isValid() || WRITE8_SKETCH) {
                    write8();
                } else if (hdr.key_increment.isValid()) {
                    hdr.bth.opcode = RC_FETCH_ADD;
                    hdr.atomic_eth.setValid();
                    hdr.atomic_eth.va_hi = va_hi;
                    hdr.atomic_eth.va_lo = md.va_lo;
                    hdr.atomic_eth.rkey = rkey_of;
                    hdr.atomic_eth.swap_add = hdr.key_increment.counter;
                    hdr.atomic_eth.compare = 0;
                    hdr.ipv4.total_len = IP_LEN_ATOMIC;
                    hdr.udp.length = UDP_LEN_ATOMIC;
                } else {
                    hdr.bth.opcode = RC_WRITE_ONLY;
                    hdr.reth.setValid();
                    hdr.reth.va_hi = va_hi;
                    hdr.reth.va_lo = md.va_lo;
                    hdr.reth.rkey = rkey_of;
                    hdr.reth.dma_len = RECORD_LEN;
                    hdr.record.setValid();
                    hdr.record.checksum = md.checksum;
                    hdr.record.mask = POSTCARD_FULL;
                    hdr.record.hop0 = md.h0;
                    hdr.record.hop1 = md.h1;
                    hdr.record.hop2 = md.h2;
                    hdr.record.hop3 = md.h3;
                    hdr.record.hop4 = md.h4;
                    hdr.ipv4.total_len = IP_LEN_RECORD;
                    hdr.udp.length = UDP_LEN_RECORD;
                }
                hdr.icrc.setValid();
                /* The ICRC, from the prefix state of the collector and
                 * shape, over the fields that vary, read where they are
                 * computed rather than from the headers written above, so
                 * the hash runs beside those writes. It goes on the wire
                 * least significant byte first. */
#if DTA_APPEND_BATCH > 1
                if (hdr.append.isValid()) {
                    /* The entries as the payload has them: the gathered
                     * data, the report's, each with its sequence. */
#if DTA_APPEND_BATCH > 2
                    bit<32> c = icrc_hash_batch.get({md.icrc_batch,
                        md.ack[6:6], 7w0, md.psn[23:0],
                        va_hi, md.va_lo, rkey_of, BATCH_LEN,
                        hdr.gathered.d0, md.seq, hdr.gathered.d1, md.seq1,
                        hdr.gathered.d2, md.seq2, hdr.append.data, md.seq3});
#else
                    bit<32> c = icrc_hash_batch.get({md.icrc_batch,
                        md.ack[6:6], 7w0, md.psn[23:0],
                        va_hi, md.va_lo, rkey_of, BATCH_LEN,
                        hdr.gathered.d0, md.seq, hdr.append.data, md.seq1});
#endif
                    hdr.icrc.b0 = c[7:0];
                    hdr.icrc.b1 = c[15:8];
                    hdr.icrc.b2 = c[23:16];
                    hdr.icrc.b3 = c[31:24];
                } else
#endif
                if (hdr.key_write.isValid() || hdr.append.isValid() || WRITE8_SKETCH) {
                    bit<32> c = icrc_hash_write8.get({md.icrc_write8,
                        md.ack[6:6], 7w0, md.psn[23:0],
                        va_hi, md.va_lo, rkey_of, 32w8,
                        hdr.entry.word0, hdr.entry.word1});
                    hdr.icrc.b0 = c[7:0];
                    hdr.icrc.b1 = c[15:8];
                    hdr.icrc.b2 = c[23:16];
                    hdr.icrc.b3 = c[31:24];
                } else if (hdr.key_increment.isValid()) {
                    bit<32> c = icrc_hash_atomic.get({md.icrc_atomic,
                        md.ack[6:6], 7w0, md.psn[23:0],
                        va_hi, md.va_lo, rkey_of,
                        hdr.key_increment.counter, 64w0});
                    hdr.icrc.b0 = c[7:0];
                    hdr.icrc.b1 = c[15:8];
                    hdr.icrc.b2 = c[23:16];
                    hdr.icrc.b3 = c[31:24];
                } else {
                    bit<32> c = icrc_hash_record.get({md.icrc_record,
                        md.ack[6:6], 7w0, md.psn[23:0],
                        va_hi, md.va_lo, rkey_of, RECORD_LEN,
                        md.checksum, POSTCARD_FULL, md.h0, md.h1, md.h2, md.h3, md.h4});
                    hdr.icrc.b0 = c[7:0];
                    hdr.icrc.b1 = c[15:8];
                    hdr.icrc.b2 = c[23:16];
                    hdr.icrc.b3 = c[31:24];
                }
                /* After the ICRC's choice of shape, which reads them. */
                drop_dta();
                rdma_pkts.count(hdr.bridge.collector);
            }
        }
    }
}

control EgressDeparser(packet_out pkt,
                       inout eg_headers_t hdr,
                       in eg_metadata_t md,
                       in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_csum;

    apply {
        /* Only the packets the egress writes (RDMA, mirrored ACKs): see
         * the ingress deparser. */
        if (md.rewrite == 1) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification,
                hdr.ipv4.flags, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        /* The bridged and mirror headers stay behind. */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.dta);
        pkt.emit(hdr.key_write);
        pkt.emit(hdr.append);
        pkt.emit(hdr.key_increment);
        pkt.emit(hdr.postcard);
#ifdef DTA_SKETCH_MERGE
        pkt.emit(hdr.sketch);
        pkt.emit(hdr.sketch_col);
#endif
        pkt.emit(hdr.ack);
        pkt.emit(hdr.bth);
        pkt.emit(hdr.aeth);
        pkt.emit(hdr.reth);
        pkt.emit(hdr.atomic_eth);
        pkt.emit(hdr.entry);
#if DTA_APPEND_BATCH > 1
        pkt.emit(hdr.entries);
#endif
        pkt.emit(hdr.record);
        pkt.emit(hdr.icrc);
    }
}

Pipeline(IngressParser(),
         Ingress(),
         IngressDeparser(),
         EgressParser(),
         Egress(),
         EgressDeparser()) pipe;

Switch(pipe) main;
