/* p4/dtatofino/reporter.p4: a DTA reporter for Tofino 1 (TNA, P4_16).
 *
 * A switch that forwards IPv4 traffic and reports on the flows it forwards
 * with DTA reports (UDP 40041 -> 40040) to a collector, whose translator
 * (translator.p4, or the software translator) writes them into collector
 * memory. The Go control plane in this directory (Reporter.Script) fills
 * the tables.
 *
 * Ingress routes by longest prefix, hashes the 5-tuple into the flow key
 * (CRC-32 over src, dst, protocol, ports) and matches report_rule
 * (destination prefix and protocol, ternary, by priority): the action picks
 * the primitive and its parameters and the collector the report goes to.
 * Egress, for a forwarded packet that matched a rule, fills a mirror header
 * with what only egress knows (the queue depth at enqueue, the packet
 * length) and mirrors the packet egress-to-egress to the report session,
 * whose port leads to the translator. The mirrored copy comes back through
 * egress on that port and becomes the report:
 *
 *   Key-Write      redundancy from the rule, key = flow hash, data = queue depth
 *   Key-Increment  redundancy from the rule, key = flow hash, counter = packet bytes
 *   Postcarder     key = flow hash, hop = this switch's hop index, data = queue depth
 *   Append         list id from the rule, data = flow hash
 *
 * The base header carries the rule's immediate and retransmittable flags
 * and, for retransmittable reports, the reporter's 8-bit sequence number
 * from a register (only retransmittable reports take a number: they are
 * the ones the translator tracks). Compiled with -DDTA_NO_SEQNUM, the base
 * header is the 2-byte form.
 *
 * What this program does not do: keep reports for retransmission. The
 * paper stores a few high-priority reports in SRAM (or at the CPU) and
 * resends from the sequence a NACK names; here the ACKs and NACKs the
 * translator sends (UDP 40044, to this switch's address) are counted and
 * dropped, so a lost report is known but not resent. Reporters choose the
 * collector per rule; spreading one primitive over several collectors by a
 * hash of the key (the paper's horizontal scaling) would be one more table
 * keyed on hash bits.
 *
 * The report reuses the mirrored copy: the bytes after the headers the
 * egress parser read (the rest of the original packet, truncated by the
 * mirror session's max_pkt_len) stay behind the report. The IPv4 and UDP
 * lengths end the report before them, and translators ignore bytes after
 * a report.
 *
 * Registers are per pipe: the sequence number is that of the report port's
 * egress pipe, which is what the translator sees as one reporter as long as
 * reports leave through one port.
 *
 * Builds make p4check compiles besides the default:
 *   p4check: build -DDTA_NO_SEQNUM
 */
#include <core.p4>
#include <tna.p4>

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IP_PROTO_TCP   = 6;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> DTA_PORT       = 40040;
const bit<16> DTA_SRC_PORT   = 40041;
const bit<16> DTA_ACK_PORT   = 40044;

const bit<8> OP_NONE          = 0x00;
const bit<8> OP_KEY_WRITE     = 0x01;
const bit<8> OP_APPEND        = 0x02;
const bit<8> OP_KEY_INCREMENT = 0x03;
const bit<8> OP_POSTCARDER    = 0x04;

const bit<8> PKT_NORMAL = 0;
const bit<8> PKT_REPORT = 1;
const MirrorType_t MIRROR_REPORT = 1;

#ifdef P4TESTGEN
/* P4Testgen follows no mirrored copy, so the report rewrite (the egress
 * path of a copy that starts with a report_mirror_h) is beyond its tests.
 * make p4check generates them from -DP4TESTGEN builds, where a packet that
 * arrives on this port starts with such a header, as the first egress pass
 * writes it (type PKT_REPORT, an opcode a report_rule action sets, pad 0,
 * a Key-Write's or Key-Increment's redundancy in the range the control
 * plane accepts in a rule, 1..TESTGEN_MAX_REDUNDANCY, an IPv4 packet
 * behind it), and ingress hands it to egress as it is: the
 * mirror session's copy, made by the test. Switch builds have no such
 * port. */
const PortId_t TESTGEN_MIRROR_PORT = 100;
const bit<8> TESTGEN_MAX_REDUNDANCY = 4; /* p4/dtatofino MaxRedundancy */
#endif

const bit<32> FWD_SIZE     = 1024;
const bit<32> RULE_SIZE    = 512;
const bit<32> ADDR_SIZE    = 16;
const bit<32> OPCODE_SLOTS = 256;

/* Report lengths after the IPv4 and UDP headers: base header + primitive. */
#ifndef DTA_NO_SEQNUM
const bit<16> BASE_LEN = 3;
#else
const bit<16> BASE_LEN = 2;
#endif
const bit<16> KEY_WRITE_LEN     = 9;
const bit<16> APPEND_LEN        = 8;
const bit<16> KEY_INCREMENT_LEN = 13;
const bit<16> POSTCARD_LEN      = 9;

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

/* The ports of TCP and UDP, all the flow key needs. */
header l4_ports_h {
    bit<16> src_port;
    bit<16> dst_port;
}

header udp_rest_h {
    bit<16> length;
    bit<16> checksum;
}

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

header dta_ack_h {
    bit<8> seqnum;
    bit<1> nack;
    bit<7> reserved;
}

/* Ingress -> egress: the rule's choice for this packet. */
header bridge_h {
    bit<8>      pkt_type; /* PKT_NORMAL */
    bit<8>      opcode;   /* OP_NONE: no report */
    bit<1>      immediate;
    bit<1>      retransmittable;
    bit<6>      pad;
    bit<8>      redundancy;
    bit<32>     key;
    bit<32>     list_id;
    ipv4_addr_t collector;
}

/* Egress -> the mirrored copy: everything the report needs. */
header report_mirror_h {
    bit<8>      pkt_type; /* PKT_REPORT */
    bit<8>      opcode;
    bit<1>      immediate;
    bit<1>      retransmittable;
    bit<6>      pad;
    bit<8>      redundancy;
    bit<32>     key;
    bit<32>     data;
    bit<32>     counter;
    bit<32>     list_id;
    ipv4_addr_t collector;
}

struct ig_headers_t {
#ifdef P4TESTGEN
    report_mirror_h testgen_mirror;
#endif
    bridge_h   bridge;
    ethernet_h ethernet;
    ipv4_h     ipv4;
    l4_ports_h ports;
    udp_rest_h udp_rest;
    dta_ack_h  ack;
}

struct ig_metadata_t {
    bit<1>  to_me;
    /* The L4 ports the flow key hashes: the header's, 0 without one. */
    bit<16> sport;
    bit<16> dport;
}

struct eg_headers_t {
    report_mirror_h     mirror;
    bridge_h            bridge;
    ethernet_h          ethernet;
    ipv4_h              ipv4;
    l4_ports_h          ports;
    udp_rest_h          udp_rest;
    dta_base_h          dta;
    dta_key_write_h     key_write;
    dta_append_h        append;
    dta_key_increment_h key_increment;
    dta_postcard_h      postcard;
}

struct eg_metadata_t {
    MirrorId_t      session;
    report_mirror_h mirror;
    bit<8>          seq;
    /* The mirrored copy, which becomes a report (set by the parser). */
    bit<1>          report;
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
        md.to_me = 0;
        md.sport = 0;
        md.dport = 0;
#ifdef P4TESTGEN
        transition select(ig_intr_md.ingress_port) {
            TESTGEN_MIRROR_PORT: parse_testgen_mirror;
            default: parse_ethernet;
        }
    }

    state parse_testgen_mirror {
        pkt.extract(hdr.testgen_mirror);
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
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_TCP): parse_ports;
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_ports {
        pkt.extract(hdr.ports);
        md.sport = hdr.ports.src_port;
        md.dport = hdr.ports.dst_port;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.ports);
        pkt.extract(hdr.udp_rest);
        md.sport = hdr.ports.src_port;
        md.dport = hdr.ports.dst_port;
        transition select(hdr.ports.dst_port) {
            DTA_ACK_PORT: parse_ack;
            default: accept;
        }
    }

    state parse_ack {
        pkt.extract(hdr.ack);
        transition accept;
    }
}

control Ingress(inout ig_headers_t hdr,
                inout ig_metadata_t md,
                in ingress_intrinsic_metadata_t ig_intr_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* The translator's answers, by the NACK bit (0 ACK, 1 NACK). */
    Counter<bit<32>, bit<1>>(2, CounterType_t.PACKETS) dta_acks;

    Hash<bit<32>>(HashAlgorithm_t.CRC32) flow_hash;

    action discard() {
        ig_dprsr_md.drop_ctl = 1;
    }

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

    action to_me() {
        md.to_me = 1;
    }

    /* The switch's own addresses: ACKs and NACKs come to them. */
    table own_addr {
        key = { hdr.ipv4.dst_addr : exact @name("dst_addr"); }
        actions = { to_me; @defaultonly NoAction; }
        const default_action = NoAction();
        size = ADDR_SIZE;
    }

    action report(bit<8> opcode, bit<8> redundancy, bit<32> list_id, bit<1> immediate,
                  bit<1> retransmittable, ipv4_addr_t collector) {
        hdr.bridge.opcode = opcode;
        hdr.bridge.redundancy = redundancy;
        hdr.bridge.list_id = list_id;
        hdr.bridge.immediate = immediate;
        hdr.bridge.retransmittable = retransmittable;
        hdr.bridge.collector = collector;
    }

    action report_key_write(bit<8> redundancy, bit<1> immediate, bit<1> retransmittable, ipv4_addr_t collector) {
        report(OP_KEY_WRITE, redundancy, 0, immediate, retransmittable, collector);
    }

    action report_key_increment(bit<8> redundancy, bit<1> immediate, bit<1> retransmittable, ipv4_addr_t collector) {
        report(OP_KEY_INCREMENT, redundancy, 0, immediate, retransmittable, collector);
    }

    action report_postcard(bit<1> immediate, bit<1> retransmittable, ipv4_addr_t collector) {
        report(OP_POSTCARDER, 0, 0, immediate, retransmittable, collector);
    }

    action report_append(bit<32> list_id, bit<1> immediate, bit<1> retransmittable, ipv4_addr_t collector) {
        report(OP_APPEND, 0, list_id, immediate, retransmittable, collector);
    }

    /* Which packets are reported, and how. */
    table report_rule {
        key = {
            hdr.ipv4.dst_addr : ternary @name("dst_addr");
            hdr.ipv4.protocol : ternary @name("protocol");
        }
        actions = { report_key_write; report_key_increment; report_postcard; report_append; NoAction; }
        const default_action = NoAction();
        size = RULE_SIZE;
    }

    apply {
#ifdef P4TESTGEN
        if (hdr.testgen_mirror.isValid()) {
            /* The test's mirrored copy, back out of the port it came in
             * by; one the first egress pass could not have written is
             * dropped. */
            ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
            if (hdr.testgen_mirror.pkt_type != PKT_REPORT || hdr.testgen_mirror.opcode == OP_NONE ||
                hdr.testgen_mirror.opcode > OP_POSTCARDER || hdr.testgen_mirror.pad != 0 || !hdr.ipv4.isValid()) {
                discard();
            } else if ((hdr.testgen_mirror.opcode == OP_KEY_WRITE || hdr.testgen_mirror.opcode == OP_KEY_INCREMENT) &&
                       (hdr.testgen_mirror.redundancy == 0 || hdr.testgen_mirror.redundancy > TESTGEN_MAX_REDUNDANCY)) {
                discard();
            }
            exit;
        }
#endif
        hdr.bridge.setValid();
        hdr.bridge.pkt_type = PKT_NORMAL;
        hdr.bridge.opcode = OP_NONE;
        hdr.bridge.immediate = 0;
        hdr.bridge.retransmittable = 0;
        hdr.bridge.pad = 0;
        hdr.bridge.redundancy = 0;
        hdr.bridge.key = 0;
        hdr.bridge.list_id = 0;
        hdr.bridge.collector = 0;
        if (!hdr.ipv4.isValid()) {
            discard();
        } else {
            own_addr.apply();
            if (md.to_me == 1) {
                if (hdr.ack.isValid()) {
                    dta_acks.count(hdr.ack.nack);
                }
                discard();
            } else if (ipv4_fwd.apply().hit) {
                /* One field list per Hash instance: the ports come from
                 * metadata the parser zeroes for packets without them. */
                hdr.bridge.key = flow_hash.get({hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                                                md.sport, md.dport});
                report_rule.apply();
            }
        }
    }
}

control IngressDeparser(packet_out pkt,
                        inout ig_headers_t hdr,
                        in ig_metadata_t md,
                        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
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
        md.session = 0;
        md.seq = 0;
        md.report = 0;
        transition select(pkt.lookahead<bit<8>>()) {
            PKT_REPORT: parse_mirror;
            default: parse_bridge;
        }
    }

    state parse_mirror {
        pkt.extract(hdr.mirror);
        md.report = 1;
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
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_TCP): parse_ports;
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_ports {
        pkt.extract(hdr.ports);
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.ports);
        pkt.extract(hdr.udp_rest);
        transition accept;
    }
}

control Egress(inout eg_headers_t hdr,
               inout eg_metadata_t md,
               in egress_intrinsic_metadata_t eg_intr_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    /* Reports sent, by opcode. */
    Counter<bit<32>, bit<8>>(OPCODE_SLOTS, CounterType_t.PACKETS) reports_sent;

#ifndef DTA_NO_SEQNUM
    /* The reporter's sequence number: the next retransmittable report's. */
    Register<bit<8>, bit<1>>(1, 0) report_seq;
    RegisterAction<bit<8>, bit<1>, bit<8>>(report_seq) seq_next = {
        void apply(inout bit<8> value, out bit<8> rv) {
            rv = value;
            value = value + 1;
        }
    };
#endif

    mac_addr_t report_smac = 0;
    mac_addr_t report_dmac = 0;
    ipv4_addr_t report_src = 0;
    bit<8> hop_index = 0;

    /* This reporter: the report session (whose port leads to the
     * translator), the reports' source MAC and address, the next hop's MAC
     * and the switch's hop index on the paths it reports (Postcarder). */
    action set_reporter(MirrorId_t session, mac_addr_t smac, mac_addr_t dmac, ipv4_addr_t src_addr, bit<8> hop) {
        md.session = session;
        report_smac = smac;
        report_dmac = dmac;
        report_src = src_addr;
        hop_index = hop;
    }

    table reporter_cfg {
        actions = { set_reporter; }
        default_action = set_reporter(0, 0, 0, 0, 0);
        size = 1;
    }

    action lengths(bit<16> len) {
        hdr.udp_rest.length = 8 + BASE_LEN + len;
        hdr.ipv4.total_len = 28 + BASE_LEN + len;
    }

    apply {
        reporter_cfg.apply();
        if (hdr.mirror.isValid()) {
            /* The mirrored copy becomes the report. */
            hdr.ethernet.dst_addr = report_dmac;
            hdr.ethernet.src_addr = report_smac;
            /* The software reporter's datagram (dtatranslator.WriteUDP4):
             * DSCP 0 (a report does not inherit the priority of the packet
             * it reports on), ID 0, DF, TTL 64, the UDP checksum (in the
             * deparser). */
            hdr.ipv4.version = 4;
            hdr.ipv4.ihl = 5;
            hdr.ipv4.dscp = 0;
            hdr.ipv4.ecn = 0;
            hdr.ipv4.identification = 0;
            hdr.ipv4.flags = 2;
            hdr.ipv4.frag_offset = 0;
            hdr.ipv4.ttl = 64;
            hdr.ipv4.protocol = IP_PROTO_UDP;
            hdr.ipv4.src_addr = report_src;
            hdr.ipv4.dst_addr = hdr.mirror.collector;
            hdr.ports.setValid();
            hdr.ports.src_port = DTA_SRC_PORT;
            hdr.ports.dst_port = DTA_PORT;
            hdr.udp_rest.setValid();
            hdr.udp_rest.checksum = 0;

            hdr.dta.setValid();
            hdr.dta.opcode = hdr.mirror.opcode;
            hdr.dta.immediate = hdr.mirror.immediate;
            hdr.dta.retransmittable = hdr.mirror.retransmittable;
            hdr.dta.reserved = 0;
#ifndef DTA_NO_SEQNUM
            if (hdr.mirror.retransmittable == 1) {
                md.seq = seq_next.execute(0);
            }
            hdr.dta.seqnum = md.seq;
#endif
            if (hdr.mirror.opcode == OP_KEY_WRITE) {
                hdr.key_write.setValid();
                hdr.key_write.redundancy = hdr.mirror.redundancy;
                hdr.key_write.key = hdr.mirror.key;
                hdr.key_write.data = hdr.mirror.data;
                lengths(KEY_WRITE_LEN);
            } else if (hdr.mirror.opcode == OP_KEY_INCREMENT) {
                hdr.key_increment.setValid();
                hdr.key_increment.redundancy = hdr.mirror.redundancy;
                hdr.key_increment.key = hdr.mirror.key;
                hdr.key_increment.counter = (bit<64>)hdr.mirror.counter;
                lengths(KEY_INCREMENT_LEN);
            } else if (hdr.mirror.opcode == OP_POSTCARDER) {
                hdr.postcard.setValid();
                hdr.postcard.key = hdr.mirror.key;
                hdr.postcard.hop = hop_index;
                hdr.postcard.data = hdr.mirror.data;
                lengths(POSTCARD_LEN);
            } else {
                hdr.append.setValid();
                hdr.append.list_id = hdr.mirror.list_id;
                hdr.append.data = hdr.mirror.key;
                lengths(APPEND_LEN);
            }
            reports_sent.count(hdr.mirror.opcode);
        } else if (hdr.bridge.isValid() && hdr.bridge.opcode != OP_NONE && md.session != 0) {
            /* What only egress knows goes into the mirror header. */
            md.mirror.setValid();
            md.mirror.pkt_type = PKT_REPORT;
            md.mirror.opcode = hdr.bridge.opcode;
            md.mirror.immediate = hdr.bridge.immediate;
            md.mirror.retransmittable = hdr.bridge.retransmittable;
            md.mirror.pad = 0;
            md.mirror.redundancy = hdr.bridge.redundancy;
            md.mirror.key = hdr.bridge.key;
            md.mirror.data = (bit<32>)eg_intr_md.enq_qdepth;
            md.mirror.counter = (bit<32>)eg_intr_md.pkt_length;
            md.mirror.list_id = hdr.bridge.list_id;
            md.mirror.collector = hdr.bridge.collector;
            eg_dprsr_md.mirror_type = MIRROR_REPORT;
        }
    }
}

control EgressDeparser(packet_out pkt,
                       inout eg_headers_t hdr,
                       in eg_metadata_t md,
                       in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_csum;
    /* One per primitive: a deparser checksum sums fixed fields. */
    Checksum() kw_csum;
    Checksum() ki_csum;
    Checksum() pc_csum;
    Checksum() ap_csum;
    Mirror(MIRROR_REPORT) mirror;

    apply {
        if (eg_dprsr_md.mirror_type == MIRROR_REPORT) {
            mirror.emit<report_mirror_h>(md.session, md.mirror);
        }
        /* Only the report the egress writes (the mirrored copy): the checksum unit sums the 20
         * bytes parsed, so a routed packet with IP options would leave
         * with a wrong checksum, and one that came in corrupt would leave
         * looking sound. */
        if (md.report == 1) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification,
                hdr.ipv4.flags, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        /* A report carries the UDP checksum the software reporter's does
         * (pseudo-header, UDP header, the DTA report; the bytes of the
         * mirrored packet behind it are outside the UDP length). */
        if (hdr.key_write.isValid()) {
            hdr.udp_rest.checksum = kw_csum.update({
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp_rest.length,
                hdr.ports.src_port, hdr.ports.dst_port, hdr.udp_rest.length,
#ifndef DTA_NO_SEQNUM
                hdr.dta.opcode, hdr.dta.seqnum, hdr.dta.immediate, hdr.dta.retransmittable, hdr.dta.reserved,
#else
                hdr.dta.opcode, hdr.dta.immediate, hdr.dta.retransmittable, hdr.dta.reserved,
#endif
                hdr.key_write.redundancy, hdr.key_write.key, hdr.key_write.data});
        } else if (hdr.key_increment.isValid()) {
            hdr.udp_rest.checksum = ki_csum.update({
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp_rest.length,
                hdr.ports.src_port, hdr.ports.dst_port, hdr.udp_rest.length,
#ifndef DTA_NO_SEQNUM
                hdr.dta.opcode, hdr.dta.seqnum, hdr.dta.immediate, hdr.dta.retransmittable, hdr.dta.reserved,
#else
                hdr.dta.opcode, hdr.dta.immediate, hdr.dta.retransmittable, hdr.dta.reserved,
#endif
                hdr.key_increment.redundancy, hdr.key_increment.key, hdr.key_increment.counter});
        } else if (hdr.postcard.isValid()) {
            hdr.udp_rest.checksum = pc_csum.update({
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp_rest.length,
                hdr.ports.src_port, hdr.ports.dst_port, hdr.udp_rest.length,
#ifndef DTA_NO_SEQNUM
                hdr.dta.opcode, hdr.dta.seqnum, hdr.dta.immediate, hdr.dta.retransmittable, hdr.dta.reserved,
#else
                hdr.dta.opcode, hdr.dta.immediate, hdr.dta.retransmittable, hdr.dta.reserved,
#endif
                hdr.postcard.key, hdr.postcard.hop, hdr.postcard.data});
        } else if (hdr.append.isValid()) {
            hdr.udp_rest.checksum = ap_csum.update({
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp_rest.length,
                hdr.ports.src_port, hdr.ports.dst_port, hdr.udp_rest.length,
#ifndef DTA_NO_SEQNUM
                hdr.dta.opcode, hdr.dta.seqnum, hdr.dta.immediate, hdr.dta.retransmittable, hdr.dta.reserved,
#else
                hdr.dta.opcode, hdr.dta.immediate, hdr.dta.retransmittable, hdr.dta.reserved,
#endif
                hdr.append.list_id, hdr.append.data});
        }
        /* The bridged and mirror headers stay behind. */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ports);
        pkt.emit(hdr.udp_rest);
        pkt.emit(hdr.dta);
        pkt.emit(hdr.key_write);
        pkt.emit(hdr.append);
        pkt.emit(hdr.key_increment);
        pkt.emit(hdr.postcard);
    }
}

Pipeline(IngressParser(),
         Ingress(),
         IngressDeparser(),
         EgressParser(),
         Egress(),
         EgressDeparser()) pipe;

Switch(pipe) main;
