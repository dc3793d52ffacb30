/* p4/luminatofino/injector.p4: Lumina's event injector for Tofino 1 (TNA, P4_16).
 *
 * The same behaviour as the Go software injector (translator/inject), table
 * for table; the Go control plane in this directory (Program.Script) turns
 * the same compiled intents and connection metadata into a bfrt_python script
 * that fills these tables and registers.
 *
 * Ingress, for every packet:
 *   - ARP requests are answered in the data plane (proxy ARP): for the
 *     switch's own address on the ingress port and for addresses routed out
 *     of another port, so the hosts of a test reach each other through the
 *     injector as if on one subnet. Other ARP packets are dropped; nothing
 *     goes to the CPU port.
 *   - IPv4 and IPv6 packets are routed by longest prefix to (egress port,
 *     next-hop MAC, port MAC); a /32 (/128) entry is the exact match on the
 *     destination. Packets without a route are dropped.
 * and for every routed RoCEv2 packet (UDP destination port 4791):
 *   - the 48-bit mirror sequence number is incremented (the first packet gets
 *     1), the 48-bit ingress MAC timestamp taken, and a mirror session chosen
 *     by weighted round-robin over the dumper ports;
 *   - data packets (RC/UC opcodes that carry payload) of a known connection
 *     update that connection's ITER registers, then match the event tables
 *     on {src IP, dst IP, dst QPN, PSN, ITER} (and, for `psn: all` intents,
 *     on {src IP, dst IP, dst QPN, ITER});
 *   - the packet is mirrored (ingress to egress) with a mirror header that
 *     carries sequence, timestamp and event. Mirroring happens whatever the
 *     event: a drop sets drop_ctl bit 0 only, which suppresses the unicast
 *     copy and keeps the mirrored one.
 * Egress:
 *   - mirrored copies get Lumina's metadata written over header fields the
 *     analysis does not need (internal/mirror/mirror.go has the layout):
 *     source MAC = sequence, destination MAC = timestamp, IPv4 TTL / IPv6 hop
 *     limit = event, UDP checksum = original UDP source port, UDP source port
 *     = 16 random bits, UDP destination port = the rewrite port (9741 unless
 *     the control plane sets another);
 *   - forwarded packets get their ECN mark or corruption here, not in
 *     ingress, so that the mirrored copy is the packet as the sender sent it
 *     whatever the mirror buffer copies (the deparsed or the received
 *     packet); the event travels in a 2-byte bridged header;
 *   - the IPv4 header checksum is recomputed in the deparser.
 * Counters (indexed by dev port): rx_pkts, rx_roce_pkts and event_pkts
 * (index port * 4 + event) in ingress, tx_pkts and mirrored_pkts in egress.
 *
 * What Tofino does not let us write directly, and what this program does
 * instead:
 *   - A RegisterAction reads and writes one register once per packet, with a
 *     small ALU. ITER therefore lives in two registers in consecutive stages:
 *     conn_psn (the last PSN in paper mode, the expected PSN in public-P4
 *     mode) returns a one-bit "new round" flag, and conn_iter then increments,
 *     resets or just reads ITER. The mode picks one of two RegisterActions on
 *     conn_psn and the flag one of three on conn_iter, in mutually exclusive
 *     branches, so each register is still accessed once per pass.
 *   - The paper's "PSN <= last PSN" is a 24-bit serial-number comparison
 *     (PSNs wrap). conn_psn keeps PSNs shifted left by 8 bits: then the 32-bit
 *     two's-complement difference (psn << 8) - (last << 8) is the 24-bit
 *     serial difference shifted, and its sign is the comparison, which a
 *     stateful ALU evaluates directly; PSN + 1 modulo 2^24 becomes a plain
 *     32-bit add of 0x100. The control plane writes the shifted values.
 *   - A register cell is at most 32 bits wide, so the 48-bit mirror sequence
 *     is two registers: mirror_seq_lo (32 bits) and mirror_seq_hi (16 bits),
 *     incremented in the next stage when the low half wraps to 0.
 *   - The round-robin cycle length is run-time configuration, which a
 *     RegisterAction can only compare with a PHV field: the keyless table
 *     wrr_cfg loads it (total weight - 1) into metadata, wrr_counter counts
 *     0..total-1 and wrr_session maps each slot to a dumper's mirror session.
 *     The control plane fills the slots with the same smooth weighted
 *     round-robin sequence the Go injector uses, so copies interleave over
 *     the dumpers instead of arriving at one in runs.
 *   - Registers and counters are per pipe: the traffic ports of a test must
 *     sit in one pipe for the mirror sequence to be global.
 *   - IPv6 has no field like the IPv4 identification that the ICRC covers
 *     and nothing else checks, and the ICRC itself sits after the payload,
 *     out of the parser's reach; IPv6 corruption flips a reserved BTH bit
 *     instead, which the ICRC also covers.
 */
#include <core.p4>
#include <tna.p4>

typedef bit<48>  mac_addr_t;
typedef bit<32>  ipv4_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<16>  conn_idx_t;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> ROCE_UDP_PORT  = 4791;
const bit<16> ARP_REQUEST    = 1;
const bit<16> ARP_REPLY      = 2;

/* Event types, as Lumina numbers them and as the mirrored copy's TTL
 * carries them. */
const bit<8> EVENT_NONE      = 0;
const bit<8> EVENT_DROP      = 1;
const bit<8> EVENT_ECN       = 2;
const bit<8> EVENT_BIT_ERROR = 3;

/* The first byte of what ingress hands to egress tells a forwarded packet
 * (bridged header) from a mirrored copy (mirror header). */
const bit<8> PKT_NORMAL = 0;
const bit<8> PKT_MIRROR = 1;
const MirrorType_t MIRROR_I2E = 1;

const bit<1> ITER_PAPER = 0;
const bit<1> ITER_P4    = 1;

/* Table and register sizes; p4/luminatofino's Go control plane checks a program
 * against the same numbers. */
const bit<32> CONN_SLOTS      = 4096;
const bit<32> PORT_SLOTS      = 512;
const bit<32> EVENT_SLOTS     = 2048; /* PORT_SLOTS x 4 events */
const bit<32> EVENT_PSN_SIZE  = 16384;
const bit<32> EVENT_ANY_SIZE  = 1024;
const bit<32> FWD_SIZE        = 1024;
const bit<32> ARP_SIZE        = 1024;
const bit<32> WRR_SLOTS       = 256;
const bit<16> DEFAULT_REWRITE_PORT = 9741;

/*************************************************************************
 * Headers
 *************************************************************************/

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header arp_h {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     oper;
    mac_addr_t  sender_hw;
    ipv4_addr_t sender_ip;
    mac_addr_t  target_hw;
    ipv4_addr_t target_ip;
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

header ipv6_h {
    bit<4>      version;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* InfiniBand Base Transport Header (12 bytes). */
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

/* Bridged from ingress to egress with every forwarded packet. */
header bridge_h {
    bit<8> pkt_type; /* PKT_NORMAL */
    bit<8> event;
}

/* Prepended to every mirrored copy. */
header mirror_h {
    bit<8>  pkt_type; /* PKT_MIRROR */
    bit<16> seq_hi;
    bit<32> seq_lo;
    bit<48> tstamp;
    bit<8>  event;
}

struct ig_headers_t {
    bridge_h   bridge;
    ethernet_h ethernet;
    arp_h      arp;
    ipv4_h     ipv4;
    ipv6_h     ipv6;
    udp_h      udp;
    bth_h      bth;
}

struct ig_metadata_t {
    /* The addresses as the event keys hold them: IPv6, or IPv4-mapped
     * (::ffff:a.b.c.d) for IPv4, like inject.Key. */
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
    bit<1>      routed;
    bit<1>      arp_ok;
    bit<1>      is_data;
    bit<1>      is_first;
    bit<1>      iter_mode;
    conn_idx_t  conn;
    bit<32>     psn8;      /* PSN << 8, see conn_psn */
    bit<8>      new_round;
    bit<16>     iter;
    bit<8>      event;
    bit<32>     seq_lo;
    bit<16>     seq_hi;
    bit<16>     wrr_last;
    bit<16>     wrr_slot;
    MirrorId_t  session;
    mirror_h    mirror;
}

struct eg_headers_t {
    mirror_h   mirror;
    bridge_h   bridge;
    ethernet_h ethernet;
    ipv4_h     ipv4;
    ipv6_h     ipv6;
    udp_h      udp;
    bth_h      bth;
}

struct eg_metadata_t {
}

/*************************************************************************
 * Ingress
 *************************************************************************/

parser IngressParser(packet_in pkt,
                     out ig_headers_t hdr,
                     out ig_metadata_t md,
                     out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        md.src_addr = 0;
        md.dst_addr = 0;
        md.routed = 0;
        md.arp_ok = 0;
        md.is_data = 0;
        md.is_first = 0;
        md.iter_mode = ITER_PAPER;
        md.conn = 0;
        md.psn8 = 0;
        md.new_round = 0;
        md.iter = 0;
        md.event = EVENT_NONE;
        md.seq_lo = 0;
        md.seq_hi = 0;
        md.wrr_last = 0;
        md.wrr_slot = 0;
        md.session = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4_version;
            ETHERTYPE_IPV6: parse_ipv6_version;
            ETHERTYPE_ARP:  parse_arp_kind;
            default: accept;
        }
    }

    /* An IP header of another version, or an IPv4 header shorter than 20
     * bytes, is left unparsed and the packet dropped like one of an
     * unknown EtherType: the Go injector's decoder rejects them too. */
    state parse_ipv4_version {
        transition select(pkt.lookahead<bit<8>>()) {
            8w0x45 .. 8w0x4f: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv6_version {
        transition select(pkt.lookahead<bit<4>>()) {
            4w6: parse_ipv6;
            default: accept;
        }
    }

    /* Only Ethernet/IPv4 ARP counts (hardware and protocol types and
     * lengths, as header.ARP.IsValid checks), and the parser checks it:
     * a gateway condition reads at most 4 bytes + 12 bits of PHV, fewer
     * than these fields and the opcode. ARP of another kind stays
     * unparsed and is dropped like an unknown EtherType; md.arp_ok tells
     * the right lengths (a parser select reads at most 32 bits). */
    state parse_arp_kind {
        transition select(pkt.lookahead<bit<32>>()) {
            32w0x00010800: parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        pkt.extract(hdr.arp);
        transition select(hdr.arp.hlen, hdr.arp.plen) {
            (8w6, 8w4): parse_arp_ok;
            default: accept;
        }
    }

    state parse_arp_ok {
        md.arp_ok = 1;
        transition accept;
    }

    /* UDP is parsed only after a 20-byte IPv4 header of an unfragmented
     * datagram, like the Go injector, which skips fragments. */
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) {
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            ROCE_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        pkt.extract(hdr.bth);
        transition accept;
    }
}

control Ingress(inout ig_headers_t hdr,
                inout ig_metadata_t md,
                in ingress_intrinsic_metadata_t ig_intr_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* ---- counters ------------------------------------------------------ */

    Counter<bit<32>, PortId_t>(PORT_SLOTS, CounterType_t.PACKETS_AND_BYTES) rx_pkts;
    Counter<bit<32>, PortId_t>(PORT_SLOTS, CounterType_t.PACKETS_AND_BYTES) rx_roce_pkts;
    /* Index ingress port * 4 + event (1 drop, 2 ECN, 3 bit error). */
    Counter<bit<32>, bit<11>>(EVENT_SLOTS, CounterType_t.PACKETS) event_pkts;

    /* ---- forwarding and proxy ARP ---------------------------------------- */

    action discard() {
        ig_dprsr_md.drop_ctl = 1;
    }

    action forward(PortId_t port, mac_addr_t dmac, mac_addr_t smac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        md.routed = 1;
    }

    table ipv4_fwd {
        key = { hdr.ipv4.dst_addr : lpm @name("dst_addr"); }
        actions = { forward; discard; }
        default_action = discard();
        size = FWD_SIZE;
    }

    table ipv6_fwd {
        key = { hdr.ipv6.dst_addr : lpm @name("dst_addr"); }
        actions = { forward; discard; }
        default_action = discard();
        size = FWD_SIZE;
    }

    /* The request becomes the reply, sent back out of the port it came in
     * on, with the switch port's MAC as the answer. */
    action arp_reply(mac_addr_t mac) {
        hdr.ethernet.dst_addr = hdr.arp.sender_hw;
        hdr.ethernet.src_addr = mac;
        hdr.arp.oper = ARP_REPLY;
        hdr.arp.target_hw = hdr.arp.sender_hw;
        hdr.arp.sender_hw = mac;
        ipv4_addr_t asked = hdr.arp.target_ip;
        hdr.arp.target_ip = hdr.arp.sender_ip;
        hdr.arp.sender_ip = asked;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }

    /* Per ingress port: the switch's own addresses (/32, arp_reply), the
     * prefixes routed out of other ports (arp_reply) and those routed out
     * of this port (discard: the host answers for itself), so the longest
     * prefix decides as in the Go injector. */
    table arp_proxy {
        key = {
            ig_intr_md.ingress_port : exact @name("ingress_port");
            hdr.arp.target_ip       : lpm   @name("target_ip");
        }
        actions = { arp_reply; discard; }
        default_action = discard();
        size = ARP_SIZE;
    }

    action set_addrs_v4() {
        md.src_addr = 96w0xffff ++ hdr.ipv4.src_addr;
        md.dst_addr = 96w0xffff ++ hdr.ipv4.dst_addr;
    }

    action set_addrs_v6() {
        md.src_addr = hdr.ipv6.src_addr;
        md.dst_addr = hdr.ipv6.dst_addr;
    }

    /* ---- configuration (keyless tables: the control plane sets their
     * default actions) -------------------------------------------------- */

    action iter_paper() {
        md.iter_mode = ITER_PAPER;
    }

    action iter_p4() {
        md.iter_mode = ITER_P4;
    }

    table iter_mode {
        actions = { iter_paper; iter_p4; }
        default_action = iter_paper();
        size = 1;
    }

    action set_wrr(bit<16> last) {
        md.wrr_last = last;
    }

    table wrr_cfg {
        actions = { set_wrr; }
        default_action = set_wrr(0);
        size = 1;
    }

    /* ---- mirror sequence, timestamp and dumper choice ------------------ */

    Register<bit<32>, bit<1>>(1, 0) mirror_seq_lo;
    RegisterAction<bit<32>, bit<1>, bit<32>>(mirror_seq_lo) seq_lo_next = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = value + 1;
            rv = value;
        }
    };

    Register<bit<16>, bit<1>>(1, 0) mirror_seq_hi;
    RegisterAction<bit<16>, bit<1>, bit<16>>(mirror_seq_hi) seq_hi_carry = {
        void apply(inout bit<16> value, out bit<16> rv) {
            value = value + 1;
            rv = value;
        }
    };
    RegisterAction<bit<16>, bit<1>, bit<16>>(mirror_seq_hi) seq_hi_read = {
        void apply(inout bit<16> value, out bit<16> rv) {
            rv = value;
        }
    };

    /* Counts 0, 1, ..., wrr_last, 0, ... and returns the slot before the
     * step. */
    Register<bit<16>, bit<1>>(1, 0) wrr_counter;
    RegisterAction<bit<16>, bit<1>, bit<16>>(wrr_counter) wrr_next = {
        void apply(inout bit<16> value, out bit<16> slot) {
            slot = value;
            if (value >= md.wrr_last) {
                value = 0;
            } else {
                value = value + 1;
            }
        }
    };

    action set_session(MirrorId_t sid) {
        md.session = sid;
        ig_dprsr_md.mirror_type = MIRROR_I2E;
    }

    /* Slot -> the mirror session of one dumper port; without entries (no
     * dumpers) nothing is mirrored, but the sequence still counts. */
    table wrr_session {
        key = { md.wrr_slot : exact @name("slot"); }
        actions = { set_session; @defaultonly NoAction; }
        const default_action = NoAction();
        size = WRR_SLOTS;
    }

    /* ---- data packets -------------------------------------------------- */

    action data_first() {
        md.is_data = 1;
        md.is_first = 1;
    }

    action data_rest() {
        md.is_data = 1;
        md.is_first = 0;
    }

    action not_data() {
        md.is_data = 0;
        md.is_first = 0;
    }

    /* RC and UC opcodes that carry payload (verbs/roce's opcode table; a
     * test in this directory checks the two agree). data_first marks the
     * First and Only packets of a message. */
    table roce_opcode {
        key = { hdr.bth.opcode : exact @name("opcode"); }
        actions = { data_first; data_rest; not_data; }
        const default_action = not_data();
        size = 64;
        const entries = {
            /* RC SEND First, Middle, Last, Last with Immediate, Only, Only with Immediate */
            0x00 : data_first();
            0x01 : data_rest();
            0x02 : data_rest();
            0x03 : data_rest();
            0x04 : data_first();
            0x05 : data_first();
            /* RC RDMA WRITE First, Middle, Last, Last with Immediate, Only, Only with Immediate */
            0x06 : data_first();
            0x07 : data_rest();
            0x08 : data_rest();
            0x09 : data_rest();
            0x0a : data_first();
            0x0b : data_first();
            /* RC RDMA READ Response First, Middle, Last, Only */
            0x0d : data_first();
            0x0e : data_rest();
            0x0f : data_rest();
            0x10 : data_first();
            /* RC SEND Last with Invalidate, SEND Only with Invalidate, ATOMIC WRITE */
            0x16 : data_rest();
            0x17 : data_first();
            0x1d : data_first();
            /* UC SEND and RDMA WRITE, as for RC */
            0x20 : data_first();
            0x21 : data_rest();
            0x22 : data_rest();
            0x23 : data_rest();
            0x24 : data_first();
            0x25 : data_first();
            0x26 : data_first();
            0x27 : data_rest();
            0x28 : data_rest();
            0x29 : data_rest();
            0x2a : data_first();
            0x2b : data_first();
        }
    }

    action set_conn(conn_idx_t idx) {
        md.conn = idx;
    }

    /* The data direction of each connection of the test -> its index into
     * the ITER registers. */
    table connection {
        key = {
            md.src_addr    : exact @name("src_addr");
            md.dst_addr    : exact @name("dst_addr");
            hdr.bth.dst_qp : exact @name("dst_qpn");
        }
        actions = { set_conn; @defaultonly NoAction; }
        const default_action = NoAction();
        size = CONN_SLOTS;
    }

    /* Per connection, PSN << 8: the previous packet's PSN (paper mode) or
     * the expected PSN (public-P4 mode). The control plane initialises it
     * to (IPSN - 1) << 8 or IPSN << 8. */
    Register<bit<32>, conn_idx_t>(CONN_SLOTS, 0) conn_psn;

    /* Paper: a packet whose PSN is not after the last one starts a new
     * round; the last PSN becomes this one. */
    RegisterAction<bit<32>, conn_idx_t, bit<8>>(conn_psn) psn_paper = {
        void apply(inout bit<32> value, out bit<8> new_round) {
            if ((int<32>)(md.psn8 - value) <= 0) {
                new_round = 1;
            } else {
                new_round = 0;
            }
            value = md.psn8;
        }
    };

    /* Public P4: a packet other than the expected one starts a new round;
     * the expected PSN becomes this one + 1 (mod 2^24: + 0x100 shifted). */
    RegisterAction<bit<32>, conn_idx_t, bit<8>>(conn_psn) psn_expected = {
        void apply(inout bit<32> value, out bit<8> new_round) {
            if (value != md.psn8) {
                new_round = 1;
            } else {
                new_round = 0;
            }
            value = md.psn8 + 0x100;
        }
    };

    /* Per connection ITER, from 1 (the control plane initialises it). */
    Register<bit<16>, conn_idx_t>(CONN_SLOTS, 1) conn_iter;
    RegisterAction<bit<16>, conn_idx_t, bit<16>>(conn_iter) iter_next = {
        void apply(inout bit<16> value, out bit<16> rv) {
            value = value + 1;
            rv = value;
        }
    };
    RegisterAction<bit<16>, conn_idx_t, bit<16>>(conn_iter) iter_restart = {
        void apply(inout bit<16> value, out bit<16> rv) {
            value = 1;
            rv = 1;
        }
    };
    RegisterAction<bit<16>, conn_idx_t, bit<16>>(conn_iter) iter_read = {
        void apply(inout bit<16> value, out bit<16> rv) {
            rv = value;
        }
    };

    /* ---- events -------------------------------------------------------- */

    /* drop_ctl bit 0 drops the unicast copy only: the packet is still
     * mirrored. */
    action drop() {
        md.event = EVENT_DROP;
        ig_dprsr_md.drop_ctl = 1;
    }

    /* ECN marking and corruption are applied in egress (see the top). */
    action mark_ecn() {
        md.event = EVENT_ECN;
    }

    action corrupt() {
        md.event = EVENT_BIT_ERROR;
    }

    table event_psn {
        key = {
            md.src_addr    : exact @name("src_addr");
            md.dst_addr    : exact @name("dst_addr");
            hdr.bth.dst_qp : exact @name("dst_qpn");
            hdr.bth.psn    : exact @name("psn");
            md.iter        : exact @name("iter");
        }
        actions = { drop; mark_ecn; corrupt; NoAction; }
        const default_action = NoAction();
        size = EVENT_PSN_SIZE;
    }

    /* psn: all intents. */
    table event_any {
        key = {
            md.src_addr    : exact @name("src_addr");
            md.dst_addr    : exact @name("dst_addr");
            hdr.bth.dst_qp : exact @name("dst_qpn");
            md.iter        : exact @name("iter");
        }
        actions = { drop; mark_ecn; corrupt; NoAction; }
        const default_action = NoAction();
        size = EVENT_ANY_SIZE;
    }

    apply {
        rx_pkts.count(ig_intr_md.ingress_port);
        hdr.bridge.setValid();
        hdr.bridge.pkt_type = PKT_NORMAL;
        hdr.bridge.event = EVENT_NONE;
        iter_mode.apply();
        wrr_cfg.apply();

        if (hdr.arp.isValid()) {
            if (md.arp_ok == 1 && hdr.arp.oper == ARP_REQUEST) {
                arp_proxy.apply();
            } else {
                discard();
            }
        } else if (hdr.ipv4.isValid()) {
            ipv4_fwd.apply();
            set_addrs_v4();
        } else if (hdr.ipv6.isValid()) {
            ipv6_fwd.apply();
            set_addrs_v6();
        } else {
            discard();
        }

        if (md.routed == 1 && hdr.bth.isValid()) {
            rx_roce_pkts.count(ig_intr_md.ingress_port);

            md.seq_lo = seq_lo_next.execute(0);
            if (md.seq_lo == 0) {
                md.seq_hi = seq_hi_carry.execute(0);
            } else {
                md.seq_hi = seq_hi_read.execute(0);
            }
            md.wrr_slot = wrr_next.execute(0);
            wrr_session.apply();

            md.psn8 = hdr.bth.psn ++ 8w0;
            roce_opcode.apply();
            if (md.is_data == 1) {
                if (connection.apply().hit) {
                    /* ITER first, then the match, as in the paper. */
                    if (md.iter_mode == ITER_PAPER) {
                        md.new_round = psn_paper.execute(md.conn);
                    } else {
                        md.new_round = psn_expected.execute(md.conn);
                    }
                    if (md.new_round == 1) {
                        md.iter = iter_next.execute(md.conn);
                    } else if (md.iter_mode == ITER_P4 && md.is_first == 1) {
                        md.iter = iter_restart.execute(md.conn);
                    } else {
                        md.iter = iter_read.execute(md.conn);
                    }
                    if (!event_psn.apply().hit) {
                        event_any.apply();
                    }
                }
            }
            if (md.event != EVENT_NONE) {
                event_pkts.count(ig_intr_md.ingress_port ++ md.event[1:0]);
            }
            hdr.bridge.event = md.event;

            md.mirror.setValid();
            md.mirror.pkt_type = PKT_MIRROR;
            md.mirror.seq_hi = md.seq_hi;
            md.mirror.seq_lo = md.seq_lo;
            md.mirror.tstamp = ig_intr_md.ingress_mac_tstamp;
            md.mirror.event = md.event;
        }
    }
}

control IngressDeparser(packet_out pkt,
                        inout ig_headers_t hdr,
                        in ig_metadata_t md,
                        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    /* Untyped: bf-p4c adds a Mirror() of its own to every ingress
     * deparser and rejects a typed one beside it ("Inconsistent mirror
     * selectors"); the type test below selects the session instead. */
    Mirror() mirror;

    apply {
        if (ig_dprsr_md.mirror_type == MIRROR_I2E) {
            mirror.emit<mirror_h>(md.session, md.mirror);
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
        transition select(pkt.lookahead<bit<8>>()) {
            PKT_MIRROR: parse_mirror;
            default: parse_bridge;
        }
    }

    state parse_mirror {
        pkt.extract(hdr.mirror);
        transition parse_ethernet;
    }

    state parse_bridge {
        pkt.extract(hdr.bridge);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
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

    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) {
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            ROCE_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        pkt.extract(hdr.bth);
        transition accept;
    }
}

control Egress(inout eg_headers_t hdr,
               inout eg_metadata_t md,
               in egress_intrinsic_metadata_t eg_intr_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    Counter<bit<32>, PortId_t>(PORT_SLOTS, CounterType_t.PACKETS_AND_BYTES) tx_pkts;
    Counter<bit<32>, PortId_t>(PORT_SLOTS, CounterType_t.PACKETS_AND_BYTES) mirrored_pkts;
    Random<bit<16>>() rng;

    /* The metadata of a mirrored copy (internal/mirror/mirror.go). The
     * UDP checksum takes the original source port here; random_sport,
     * after this table, overwrites the source port (a keyless table's
     * action with action data runs on the miss path, which cannot use
     * Random). */
    action rewrite(bit<16> dst_port) {
        hdr.ethernet.src_addr = hdr.mirror.seq_hi ++ hdr.mirror.seq_lo;
        hdr.ethernet.dst_addr = hdr.mirror.tstamp;
        hdr.udp.checksum = hdr.udp.src_port;
        hdr.udp.dst_port = dst_port;
    }

    action random_sport() {
        hdr.udp.src_port = rng.get();
    }

    /* Keyless: the control plane sets the rewrite port (Lumina's
     * rewrite-udp-dst-port) as the default action's parameter. */
    table mirror_rewrite {
        actions = { rewrite; }
        default_action = rewrite(DEFAULT_REWRITE_PORT);
        size = 1;
    }

    action ttl_v4() {
        hdr.ipv4.ttl = hdr.mirror.event;
    }

    action hop_limit_v6() {
        hdr.ipv6.hop_limit = hdr.mirror.event;
    }

    action ecn_v4() {
        hdr.ipv4.ecn = 3;
    }

    action ecn_v6() {
        hdr.ipv6.ecn = 3;
    }

    /* The same bits the Go injector flips; the header checksum is
     * recomputed below, so only the receiver's ICRC check sees it. */
    action corrupt_v4() {
        hdr.ipv4.identification = hdr.ipv4.identification ^ 0x0101;
    }

    action corrupt_bth() {
        hdr.bth.resv7 = hdr.bth.resv7 ^ 1;
    }

    apply {
        tx_pkts.count(eg_intr_md.egress_port);
        if (hdr.mirror.isValid()) {
            mirrored_pkts.count(eg_intr_md.egress_port);
            if (hdr.udp.isValid()) {
                mirror_rewrite.apply();
                random_sport();
            }
            if (hdr.ipv4.isValid()) {
                ttl_v4();
            } else if (hdr.ipv6.isValid()) {
                hop_limit_v6();
            }
        } else if (hdr.bridge.isValid()) {
            if (hdr.bridge.event == EVENT_ECN) {
                if (hdr.ipv4.isValid()) {
                    ecn_v4();
                } else if (hdr.ipv6.isValid()) {
                    ecn_v6();
                }
            } else if (hdr.bridge.event == EVENT_BIT_ERROR) {
                if (hdr.ipv4.isValid()) {
                    corrupt_v4();
                } else if (hdr.bth.isValid()) {
                    corrupt_bth();
                }
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
        hdr.ipv4.hdr_checksum = ipv4_csum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
            hdr.ipv4.total_len, hdr.ipv4.identification,
            hdr.ipv4.flags, hdr.ipv4.frag_offset,
            hdr.ipv4.ttl, hdr.ipv4.protocol,
            hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        /* The bridged and mirror headers stay behind. */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bth);
    }
}

Pipeline(IngressParser(),
         Ingress(),
         IngressDeparser(),
         EgressParser(),
         Egress(),
         EgressDeparser()) pipe;

Switch(pipe) main;
