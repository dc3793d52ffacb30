/* p4/hawkeyetofino/telemetry.p4: Hawkeye's switch side for Tofino 1 (TNA, P4_16).
 *
 * The same logic as bench/hawkeyesim (which runs it inside the fabric
 * simulator): epoch telemetry per flow, per egress port and per port
 * pair, PFC status from received pause frames, polling packets
 * (EtherType 0x6888) that follow the victim flow's path and PFC
 * causality, and a copy of each new polling event to the CPU, whose
 * poller reads the registers (the Go control plane in this directory
 * writes the setup script).
 *
 * Epochs: a packet's epoch is picked by bits of the 48-bit egress global
 * timestamp: index ts[EPOCH_SHIFT+1:EPOCH_SHIFT] (ts[21:20] by default,
 * about 1 ms) selects one of 4 register banks, the 8 bits above it are the
 * epoch id. Registers cannot be cleared in the data plane, so every flow
 * slot and every port keeps the id of the epoch it last counted in, and
 * the first packet of a newer epoch resets the counters it touches (the
 * paper's wrap-around reset, done per entry and lazily). Register banks
 * are one register indexed by {epoch index, slot}.
 *
 * Flow table: CRC-32 over {src, dst, protocol, UDP sport, dport} (the
 * order and hash of bench/hawkeyesim.flowIndex; the public P4 hashed TCP
 * ports, so RoCE flows all collided), 4096 slots an epoch, the key kept
 * in three registers. A packet of another flow in an occupied slot takes
 * it over and the old key and counters go to the CPU as an evicted flow
 * (an egress-to-egress mirror of the packet with the old entry in the
 * mirror header). Only RoCEv2 (UDP 4791) is counted, so the protocol is
 * not stored.
 *
 * Ports are folded to a 6-bit local index by port_info (also: whether the
 * port faces a host, and the pause quantum as a shift), so per-port and
 * port-pair registers stay small: 64 ports, 4096 port pairs.
 *
 * PFC: with the MAC's filterpf bit cleared, PFC frames (0x8808, opcode
 * 0x0101) reach the ingress parser; ingress sends each to the egress of
 * the port it arrived on (the port it pauses), where it sets that port's
 * pause timer to now + quanta x the port's quantum and is dropped. The
 * quantum is 2^shift ns (512 bit times rounded up to a power of two: 8 ns
 * at 100G for 5.12): Tofino has no multiplier for a variable; a table
 * over the quanta's high bits would be closer.
 *
 * Polling (Figure 6): ingress handles each event of a victim once per
 * type (a register per type, indexed by a hash of the event id and the
 * victim's 5-tuple, holding a coarse time stamp); a new flow trace is
 * unicast towards the victim's destination (victim_route); a new PFC
 * trace is multicast to the group of its ingress port (every other port
 * facing a switch, rid 1); the CPU gets one copy of a new event. Egress
 * sets the PFC bit on the unicast copy when its port is paused (timer
 * running, or an XOFF or paused packets in this or the last epoch), and drops a
 * multicast copy unless the port is paused and had traffic from the
 * polling packet's ingress in this or the last epoch (the causality
 * register, one epoch id per port pair); copies never go to hosts.
 *
 * The switch CPU (cpu.go in this directory): its copy of a new event
 * keeps the bridged header (ingress port, and the 32-bit time in place of
 * the flow hash), so the CPU knows the poll's arrival port and which
 * epochs to read; it reads the registers through bfrt, reports, and may
 * send PFC polling packets back in through its port (from_cpu), which
 * leave by the port their header names, untouched. Every per-epoch entry
 * carries the epoch id it counts in (ports, flows, port-pair meters), so
 * the CPU keeps only the epochs it reads; a flow slot keeps its hop
 * ({in, out} local indexes), which evictions carry too.
 *
 * bf-p4c places it in all 12 of Tofino 1's stages (the egress: each
 * register read once per packet, in the if/else arms here) and shaped it:
 * a gateway reads at most 4 bytes + 12 bits, so the flow key compare XORs
 * the stored key with the packet's and folds the three words into one in
 * keyless tables (as statements the compiler would fold them back into
 * one condition); a stateful ALU reads one PHV word, so a pause frame adds
 * its pause time to md.now before the timer is set, and the timer runs
 * while its end is after now in 32-bit serial order (the low 32 bits of
 * the clock wrap every 4.3 s); pause times are concatenations, not shifts
 * of a 16-bit field; the eviction header carries the 32-bit time (the CPU
 * takes the epoch id from bits 29:22): an 8-bit copy of the epoch id put
 * the timestamp's slices in one PHV container group it cannot fill. ECMP
 * of the victim route (an ActionSelector on the same hash as data) is
 * left to the routing tables this program shares with the switch's
 * forwarding; here victim_route is the LPM of ipv4_fwd.
 */
#include <core.p4>
#include <tna.p4>

/* The replication id of an egress packet: a multicast copy's, 0 for a
 * unicast packet. P4Testgen's Tofino model misreads the whole egress of a
 * program that reads egress_rid (it makes the field one bit wide; see
 * p4/internal/stf/testdata/egress_rid), and the only packets it follows
 * into egress are unicast, whose replication id is 0. make p4check
 * generates the tests with -DP4TESTGEN, which reads that 0 instead; the
 * switch builds read the field. */
#ifdef P4TESTGEN
#define EGRESS_RID(eg_md) 16w0
#else
#define EGRESS_RID(eg_md) eg_md.egress_rid
#endif

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

const bit<16> ETHERTYPE_IPV4   = 0x0800;
const bit<16> ETHERTYPE_POLL   = 0x6888;
const bit<16> ETHERTYPE_MACCTL = 0x8808;
const bit<16> OPCODE_PFC       = 0x0101;
const bit<8>  IP_PROTO_UDP     = 17;
const bit<16> ROCE_PORT        = 4791;

const bit<16> POLL_FLOW = 1;
const bit<16> POLL_PFC  = 2;

const bit<8> PKT_NORMAL = 0;
const bit<8> PKT_DATA   = 1;
const bit<8> PKT_POLL   = 2;
const bit<8> PKT_PFC    = 3;
const bit<8> PKT_EVICT  = 4;

const MirrorType_t MIRROR_EVICT = 1;

const bit<32> FWD_SIZE    = 1024;
const bit<32> PORT_SLOTS  = 64;
const bit<32> PAIR_SLOTS  = 4096;
const bit<32> FLOW_REGS   = 16384;
const bit<32> PORT_REGS   = 256;
const bit<32> METER_REGS  = 16384;
const bit<32> SEEN_SLOTS  = 4096;
const bit<32> PORT_INFO_SIZE = 512;
/* The longest pause, ns: 65535 quanta at the largest quantum (2^9 ns). */
const int<32> PAUSE_MAX_NS = 33554432;

/*************************************************************************
 * Headers
 *************************************************************************/

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

/* internal/hawkeyewire/wire.go: 19 bytes. */
header poll_h {
    bit<16>     poll_type;
    bit<6>      pad;
    bit<9>      ingress_port;
    bit<9>      egress_port;
    bit<8>      event_id;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
    bit<8>      protocol;
    bit<16>     src_port;
    bit<16>     dst_port;
}

/* 802.1Qbb: opcode, class-enable vector, eight pause times. */
header pfc_h {
    bit<16> opcode;
    bit<8>  reserved;
    bit<8>  class_enable;
    bit<16> c0;
    bit<16> c1;
    bit<16> c2;
    bit<16> c3;
    bit<16> c4;
    bit<16> c5;
    bit<16> c6;
    bit<16> c7;
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

/* The UDP header as egress reads it: the two ports as the one word the
 * flow key stores and compares. */
header udp_eg_h {
    bit<32> ports;
    bit<16> length;
    bit<16> checksum;
}

/* Ingress -> egress. */
header bridge_h {
    bit<8>  pkt_type;
    bit<7>  pad;
    bit<9>  ingress_port;
    bit<32> flow_hash;
}

/* Egress -> the CPU: a flow that lost its slot. */
header evict_h {
    bit<8>      pkt_type; /* PKT_EVICT */
    bit<32>     now;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
    bit<32>     ports;
    bit<32>     packets;
    bit<32>     qdepth_sum;
    bit<32>     paused;
    bit<16>     hop;      /* {in, out} local port indexes */
}

struct ig_headers_t {
    bridge_h   bridge;
    ethernet_h ethernet;
    poll_h     poll;
    pfc_h      pfc;
    ipv4_h     ipv4;
    udp_h      udp;
}

struct ig_metadata_t {
    bit<1>  new_flow_trace;
    bit<1>  new_pfc_trace;
    bit<12> seen_idx;
}

struct eg_headers_t {
    evict_h    evict;
    bridge_h   bridge;
    ethernet_h ethernet;
    poll_h     poll;
    pfc_h      pfc;
    ipv4_h     ipv4;
    udp_eg_h   udp;
}

struct eg_metadata_t {
    MirrorId_t session;
    evict_h    evict;
    bit<6>     port_idx;
    bit<1>     to_host;
    bit<5>     quantum_shift;
    bit<2>     epoch_idx;
    bit<8>     epoch_id;
    bit<32>    now;
    bit<32>    pause_ns;
    bit<14>    flow_idx;
    bit<8>     port_reg;
    bit<6>     in_idx;
    bit<12>    pair_idx;
    bit<14>    meter_idx;
    bit<1>     new_epoch;
    bit<1>     collided;
    bit<1>     paused;
    bit<1>     recent_pause;
    bit<1>     recent_traffic;
    bit<1>     to_cpu;
    bit<16>    old_hop;
    bit<32>    qdepth;
    bit<32>    old_src;
    bit<32>    old_dst;
    bit<32>    old_ports;
    bit<32>    diff_src;
    bit<32>    diff_dst;
    bit<32>    key_diff;
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
        md.new_flow_trace = 0;
        md.new_pfc_trace = 0;
        md.seen_idx = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4_version;
            ETHERTYPE_POLL: parse_poll;
            ETHERTYPE_MACCTL: parse_macctl;
            default: accept;
        }
    }

    state parse_poll {
        pkt.extract(hdr.poll);
        transition accept;
    }

    state parse_macctl {
        transition select(pkt.lookahead<bit<16>>()) {
            OPCODE_PFC: parse_pfc;
            default: accept;
        }
    }

    state parse_pfc {
        pkt.extract(hdr.pfc);
        transition accept;
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
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition accept;
    }
}

control Ingress(inout ig_headers_t hdr,
                inout ig_metadata_t md,
                in ingress_intrinsic_metadata_t ig_intr_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Hash<bit<32>>(HashAlgorithm_t.CRC32) flow_hash;

    /* Per event id and victim (a 12-bit hash of the two: 8-bit ids alone
     * wrap when hundreds of hosts detect across a fabric, and a new
     * victim's poll would be taken for a duplicate), the coarse time
     * (ts[33:26], about 67 ms) it was last handled at, per polling type:
     * a switch handles an event once per type while the stamp holds. */
    Hash<bit<12>>(HashAlgorithm_t.CRC16) seen_hash;
    Register<bit<8>, bit<12>>(SEEN_SLOTS, 0) seen_flow;
    RegisterAction<bit<8>, bit<12>, bit<1>>(seen_flow) mark_flow = {
        void apply(inout bit<8> value, out bit<1> rv) {
            rv = 0;
            if (value != ig_prsr_md.global_tstamp[33:26]) {
                value = ig_prsr_md.global_tstamp[33:26];
                rv = 1;
            }
        }
    };
    Register<bit<8>, bit<12>>(SEEN_SLOTS, 0) seen_pfc;
    RegisterAction<bit<8>, bit<12>, bit<1>>(seen_pfc) mark_pfc = {
        void apply(inout bit<8> value, out bit<1> rv) {
            rv = 0;
            if (value != ig_prsr_md.global_tstamp[33:26]) {
                value = ig_prsr_md.global_tstamp[33:26];
                rv = 1;
            }
        }
    };

    /* Polling packets reaching switches, by type. */
    Counter<bit<32>, bit<2>>(4, CounterType_t.PACKETS) polls;

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

    action victim_port(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
    }

    action no_victim_route() {
        md.new_flow_trace = 0;
    }

    /* The victim flow's egress: the route its destination takes. */
    table victim_route {
        key = { hdr.poll.dst_addr : lpm @name("dst_addr"); }
        actions = { victim_port; no_victim_route; }
        default_action = no_victim_route();
        size = FWD_SIZE;
    }

    action cpu_send() {
        ig_tm_md.ucast_egress_port = hdr.poll.egress_port;
    }

    /* The switch CPU's port: a polling packet from it is the CPU's
     * re-trace, a PFC trace it decided on after reading the registers,
     * sent out of the port its header names, as the CPU wrote it (no
     * duplicate check, no copy back to the CPU, left alone in egress). */
    table from_cpu {
        key = { ig_intr_md.ingress_port : exact @name("ingress_port"); }
        actions = { cpu_send; NoAction; }
        default_action = NoAction();
        size = 4;
    }

    action pfc_group(MulticastGroupId_t mgid) {
        ig_tm_md.mcast_grp_a = mgid;
        ig_tm_md.rid = 0;
    }

    action no_pfc_group() {
        md.new_pfc_trace = 0;
    }

    /* Per ingress port, the multicast group of every other port facing a
     * switch: the candidates of a PFC trace, which egress filters. */
    table pfc_mcast {
        key = { ig_intr_md.ingress_port : exact @name("ingress_port"); }
        actions = { pfc_group; no_pfc_group; }
        default_action = no_pfc_group();
        size = PORT_INFO_SIZE;
    }

    apply {
        hdr.bridge.setValid();
        hdr.bridge.pkt_type = PKT_NORMAL;
        hdr.bridge.pad = 0;
        hdr.bridge.ingress_port = ig_intr_md.ingress_port;
        hdr.bridge.flow_hash = 0;
        if (hdr.poll.isValid()) {
            if (from_cpu.apply().hit) {
                /* PKT_NORMAL: egress leaves the CPU's re-trace alone. */
                ig_tm_md.qid = 7;
            } else {
                polls.count(hdr.poll.poll_type[1:0]);
                hdr.bridge.pkt_type = PKT_POLL;
                md.seen_idx = seen_hash.get({hdr.poll.event_id, hdr.poll.src_addr, hdr.poll.dst_addr,
                                             hdr.poll.protocol, hdr.poll.src_port, hdr.poll.dst_port});
                if (hdr.poll.poll_type[0:0] == 1) {
                    md.new_flow_trace = mark_flow.execute(md.seen_idx);
                }
                if (hdr.poll.poll_type[1:1] == 1) {
                    md.new_pfc_trace = mark_pfc.execute(md.seen_idx);
                }
                if (md.new_flow_trace == 1 || md.new_pfc_trace == 1) {
                    /* The CPU poller collects on this copy. */
                    ig_tm_md.copy_to_cpu = 1;
                }
                /* ucast_egress_port is set (made valid) only by victim_port:
                 * a PFC trace alone leaves as multicast copies. */
                if (md.new_flow_trace == 1) {
                    victim_route.apply();
                }
                if (md.new_pfc_trace == 1) {
                    pfc_mcast.apply();
                }
                if (md.new_flow_trace == 0 && md.new_pfc_trace == 0) {
                    /* Nothing to forward; drop_ctl bit 0 spares the CPU copy. */
                    ig_dprsr_md.drop_ctl = 1;
                }
                /* Polling packets ride the control class, never paused. */
                ig_tm_md.qid = 7;
            }
        } else if (hdr.pfc.isValid()) {
            /* To the egress of the port it pauses. */
            hdr.bridge.pkt_type = PKT_PFC;
            ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
        } else if (hdr.ipv4.isValid()) {
            ipv4_fwd.apply();
            if (hdr.udp.isValid() && hdr.udp.dst_port == ROCE_PORT) {
                hdr.bridge.pkt_type = PKT_DATA;
                hdr.bridge.flow_hash = flow_hash.get({hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                                                      hdr.udp.src_port, hdr.udp.dst_port});
            }
        } else {
            discard();
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
        md.evict.setInvalid();
        md.port_idx = 0;
        md.to_host = 0;
        md.quantum_shift = 0;
        md.epoch_idx = 0;
        md.epoch_id = 0;
        md.now = 0;
        md.pause_ns = 0;
        md.flow_idx = 0;
        md.port_reg = 0;
        md.in_idx = 0;
        md.pair_idx = 0;
        md.meter_idx = 0;
        md.new_epoch = 0;
        md.collided = 0;
        md.paused = 0;
        md.recent_pause = 0;
        md.recent_traffic = 0;
        md.to_cpu = 0;
        md.old_hop = 0;
        md.qdepth = 0;
        md.old_src = 0;
        md.old_dst = 0;
        md.old_ports = 0;
        md.diff_src = 0;
        md.diff_dst = 0;
        md.key_diff = 0;
        transition select(pkt.lookahead<bit<8>>()) {
            PKT_EVICT: parse_evict;
            default: parse_bridge;
        }
    }

    state parse_evict {
        pkt.extract(hdr.evict);
        transition accept;
    }

    state parse_bridge {
        pkt.extract(hdr.bridge);
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_POLL: parse_poll;
            ETHERTYPE_MACCTL: parse_pfc;
            default: accept;
        }
    }

    state parse_poll {
        pkt.extract(hdr.poll);
        transition accept;
    }

    state parse_pfc {
        pkt.extract(hdr.pfc);
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition accept;
    }
}

control Egress(inout eg_headers_t hdr,
               inout eg_metadata_t md,
               in egress_intrinsic_metadata_t eg_intr_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    /* ---- PFC status: the pause timer, the low 32 bits of the time the
     * pause ends (ns). ---- */
    Register<bit<32>, bit<6>>(PORT_SLOTS, 0) pause_until;
    /* Both actions read md.now alone: a stateful ALU's PHV input is one
     * word here, so a PFC frame adds its pause time to md.now first. The
     * timer runs while the end is after now in 32-bit serial order (the
     * low 32 bits of the clock wrap every 4.3 s) and less than the
     * longest pause (65535 quanta of 2^9 ns) ahead: a timer that ran out
     * more than 2^31 ns ago, or never ran (0), is after now again in
     * serial order, and read alone it paused every port for half of
     * every 4.3 s. */
    RegisterAction<bit<32>, bit<6>, bit<1>>(pause_until) pause_set = {
        void apply(inout bit<32> value) {
            value = md.now;
        }
    };
    RegisterAction<bit<32>, bit<6>, bit<1>>(pause_until) pause_check = {
        void apply(inout bit<32> value, out bit<1> rv) {
            rv = 0;
            if ((int<32>)(value - md.now) > 0 && (int<32>)(value - md.now) < PAUSE_MAX_NS) {
                rv = 1;
            }
        }
    };

    /* ---- Flow table: {epoch index, hash slot}. ---- */
    Register<bit<8>, bit<14>>(FLOW_REGS, 0) flow_epoch;
    RegisterAction<bit<8>, bit<14>, bit<1>>(flow_epoch) flow_epoch_roll = {
        void apply(inout bit<8> value, out bit<1> rv) {
            rv = 0;
            if (value != md.epoch_id) {
                value = md.epoch_id;
                rv = 1;
            }
        }
    };
    Register<bit<32>, bit<14>>(FLOW_REGS, 0) flow_src;
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_src) flow_src_swap = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = hdr.ipv4.src_addr;
        }
    };
    Register<bit<32>, bit<14>>(FLOW_REGS, 0) flow_dst;
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_dst) flow_dst_swap = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = hdr.ipv4.dst_addr;
        }
    };
    Register<bit<32>, bit<14>>(FLOW_REGS, 0) flow_ports;
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_ports) flow_ports_swap = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = hdr.udp.ports;
        }
    };
    /* Counters: add, or (new epoch, new flow) return the old value and
     * start over. */
    Register<bit<32>, bit<14>>(FLOW_REGS, 0) flow_pkts;
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_pkts) flow_pkts_add = {
        void apply(inout bit<32> value) { value = value + 1; }
    };
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_pkts) flow_pkts_restart = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; value = 1; }
    };
    Register<bit<32>, bit<14>>(FLOW_REGS, 0) flow_qdepth;
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_qdepth) flow_qdepth_add = {
        void apply(inout bit<32> value) { value = value + md.qdepth; }
    };
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_qdepth) flow_qdepth_restart = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; value = md.qdepth; }
    };
    Register<bit<32>, bit<14>>(FLOW_REGS, 0) flow_paused;
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_paused) flow_paused_add = {
        void apply(inout bit<32> value) { value = value + (bit<32>)md.paused; }
    };
    RegisterAction<bit<32>, bit<14>, bit<32>>(flow_paused) flow_paused_restart = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; value = (bit<32>)md.paused; }
    };
    /* The flow's hop here, {in, out} local port indexes (the analyzer
     * follows the victim by its ingress ports): the last packet's. */
    Register<bit<16>, bit<14>>(FLOW_REGS, 0) flow_hop;
    RegisterAction<bit<16>, bit<14>, bit<16>>(flow_hop) flow_hop_swap = {
        void apply(inout bit<16> value, out bit<16> rv) {
            rv = value;
            value = (bit<16>)md.pair_idx;
        }
    };

    /* ---- Port table: {epoch index, port index}. ---- */
    Register<bit<8>, bit<8>>(PORT_REGS, 0) port_epoch;
    RegisterAction<bit<8>, bit<8>, bit<1>>(port_epoch) port_epoch_roll = {
        void apply(inout bit<8> value, out bit<1> rv) {
            rv = 0;
            if (value != md.epoch_id) {
                value = md.epoch_id;
                rv = 1;
            }
        }
    };
    Register<bit<32>, bit<8>>(PORT_REGS, 0) port_pkts;
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_pkts) port_pkts_add = {
        void apply(inout bit<32> value) { value = value + 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_pkts) port_pkts_restart = {
        void apply(inout bit<32> value) { value = 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_pkts) port_pkts_zero = {
        void apply(inout bit<32> value) { value = 0; }
    };
    Register<bit<32>, bit<8>>(PORT_REGS, 0) port_qdepth;
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_qdepth) port_qdepth_add = {
        void apply(inout bit<32> value) { value = value + md.qdepth; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_qdepth) port_qdepth_restart = {
        void apply(inout bit<32> value) { value = md.qdepth; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_qdepth) port_qdepth_zero = {
        void apply(inout bit<32> value) { value = 0; }
    };
    Register<bit<32>, bit<8>>(PORT_REGS, 0) port_paused;
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_paused) port_paused_add = {
        void apply(inout bit<32> value) { value = value + (bit<32>)md.paused; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_paused) port_paused_restart = {
        void apply(inout bit<32> value) { value = (bit<32>)md.paused; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_paused) port_paused_zero = {
        void apply(inout bit<32> value) { value = 0; }
    };
    /* PFC frames received, per epoch: a pause frame rolls the port's
     * epoch as a data packet does, so a port that only receives pauses
     * (a PFC storm stops its traffic) counts them in the epoch they came
     * in, and the CPU tells every counter's epoch by port_epoch. */
    Register<bit<32>, bit<8>>(PORT_REGS, 0) port_pfc_frames;
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_pfc_frames) pfc_frames_add = {
        void apply(inout bit<32> value) { value = value + 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_pfc_frames) pfc_frames_restart = {
        void apply(inout bit<32> value) { value = 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(port_pfc_frames) pfc_frames_zero = {
        void apply(inout bit<32> value) { value = 0; }
    };

    /* ---- Port pairs: bytes {epoch index, in, out}, and the epoch id
     * traffic last went in -> out (causality for tracing). ---- */
    Register<bit<32>, bit<14>>(METER_REGS, 0) pair_bytes;
    /* The epoch id each meter counts in: a meter restarts on its own
     * first packet of a new epoch (a restart by the egress port's roll
     * alone left the other ingress ports' bytes of four epochs ago). */
    Register<bit<8>, bit<14>>(METER_REGS, 0) pair_epoch;
    RegisterAction<bit<8>, bit<14>, bit<1>>(pair_epoch) pair_epoch_roll = {
        void apply(inout bit<8> value, out bit<1> rv) {
            rv = 0;
            if (value != md.epoch_id) {
                value = md.epoch_id;
                rv = 1;
            }
        }
    };
    RegisterAction<bit<32>, bit<14>, bit<32>>(pair_bytes) pair_bytes_add = {
        void apply(inout bit<32> value) { value = value + (bit<32>)eg_intr_md.pkt_length; }
    };
    RegisterAction<bit<32>, bit<14>, bit<32>>(pair_bytes) pair_bytes_restart = {
        void apply(inout bit<32> value) { value = (bit<32>)eg_intr_md.pkt_length; }
    };
    Register<bit<8>, bit<12>>(PAIR_SLOTS, 0) pair_seen;
    RegisterAction<bit<8>, bit<12>, bit<1>>(pair_seen) pair_seen_set = {
        void apply(inout bit<8> value) { value = md.epoch_id; }
    };
    RegisterAction<bit<8>, bit<12>, bit<1>>(pair_seen) pair_seen_recent = {
        void apply(inout bit<8> value, out bit<1> rv) {
            rv = 0;
            if (md.epoch_id - value <= 1) {
                rv = 1;
            }
        }
    };
    /* The epoch id of the last paused packet per port. */
    Register<bit<8>, bit<6>>(PORT_SLOTS, 0) port_last_pause;
    RegisterAction<bit<8>, bit<6>, bit<1>>(port_last_pause) last_pause_set = {
        void apply(inout bit<8> value) { value = md.epoch_id; }
    };
    RegisterAction<bit<8>, bit<6>, bit<1>>(port_last_pause) last_pause_recent = {
        void apply(inout bit<8> value, out bit<1> rv) {
            rv = 0;
            if (md.epoch_id - value <= 1) {
                rv = 1;
            }
        }
    };

    /* Polling copies sent on, by the type they carry. */
    Counter<bit<32>, bit<2>>(4, CounterType_t.PACKETS) polls_sent;
    Counter<bit<32>, bit<1>>(1, CounterType_t.PACKETS) evictions;

    action set_port(bit<6> idx, bit<1> to_host, bit<5> quantum_shift) {
        md.port_idx = idx;
        md.to_host = to_host;
        md.quantum_shift = quantum_shift;
    }

    action cpu_port() {
        md.to_cpu = 1;
    }

    action unknown_port() {
        md.port_idx = 0;
        md.to_host = 1;
        md.quantum_shift = 3;
    }

    /* Dev port -> local index, whether it faces a host, the pause
     * quantum (2^shift ns); or the switch CPU's port. */
    table port_info {
        key = { eg_intr_md.egress_port : exact @name("egress_port"); }
        actions = { set_port; cpu_port; unknown_port; }
        default_action = unknown_port();
        size = PORT_INFO_SIZE;
    }

    action in_index(bit<6> idx) {
        md.in_idx = idx;
    }

    /* The bridged ingress port's local index. */
    table in_port_info {
        key = { hdr.bridge.ingress_port : exact @name("ingress_port"); }
        actions = { in_index; NoAction; }
        default_action = NoAction();
        size = PORT_INFO_SIZE;
    }

    /* The paper's XOR compare of the stored key. A gateway reads at most
     * 4 bytes + 12 bits, so the 12 bytes of differences are folded into
     * one word first, in two dependent steps. They are keyless tables, not
     * plain statements, so the compiler cannot fold them back into one
     * condition over the whole key. */
    action key_xor() {
        md.diff_src = md.old_src ^ hdr.ipv4.src_addr;
        md.diff_dst = md.old_dst ^ hdr.ipv4.dst_addr;
        md.key_diff = md.old_ports ^ hdr.udp.ports;
    }

    table flow_key_xor {
        actions = { key_xor; }
        const default_action = key_xor();
        size = 1;
    }

    action key_fold_addrs() {
        md.diff_src = md.diff_src | md.diff_dst;
    }

    table flow_key_fold_addrs {
        actions = { key_fold_addrs; }
        const default_action = key_fold_addrs();
        size = 1;
    }

    action key_fold() {
        md.key_diff = md.key_diff | md.diff_src;
    }

    table flow_key_fold {
        actions = { key_fold; }
        const default_action = key_fold();
        size = 1;
    }

    action drop_copy() {
        eg_dprsr_md.drop_ctl = 1;
    }

    apply {
        if (hdr.evict.isValid()) {
            /* A mirrored eviction on its way to the CPU port. */
            evictions.count(0);
            return;
        }
        md.now = eg_prsr_md.global_tstamp[31:0];
        md.epoch_idx = md.now[21:20];
        md.epoch_id = md.now[29:22];
        md.qdepth = (bit<32>)eg_intr_md.enq_qdepth;
        md.paused = 0;
        md.collided = 0;
        port_info.apply();
        in_port_info.apply();
        md.pair_idx = md.in_idx ++ md.port_idx;
        md.port_reg = md.epoch_idx ++ md.port_idx;
        md.meter_idx = md.epoch_idx ++ md.pair_idx;

        if (hdr.bridge.pkt_type == PKT_PFC) {
            /* The lossless data class's pause time (priority 3, RoCEv2's),
             * in ns by the port's quantum. */
            if (md.quantum_shift == 3) {
                md.pause_ns = 13w0 ++ hdr.pfc.c3 ++ 3w0;
            } else if (md.quantum_shift == 4) {
                md.pause_ns = 12w0 ++ hdr.pfc.c3 ++ 4w0;
            } else if (md.quantum_shift == 5) {
                md.pause_ns = 11w0 ++ hdr.pfc.c3 ++ 5w0;
            } else if (md.quantum_shift == 6) {
                md.pause_ns = 10w0 ++ hdr.pfc.c3 ++ 6w0;
            } else {
                md.pause_ns = 7w0 ++ hdr.pfc.c3 ++ 9w0;
            }
            md.now = md.now + md.pause_ns;
            pause_set.execute(md.port_idx);
            if (port_epoch_roll.execute(md.port_reg) == 1) {
                pfc_frames_restart.execute(md.port_reg);
                port_pkts_zero.execute(md.port_reg);
                port_qdepth_zero.execute(md.port_reg);
                port_paused_zero.execute(md.port_reg);
            } else {
                pfc_frames_add.execute(md.port_reg);
            }
            /* An XOFF marks the port paused in this epoch even when it
             * held no packet (its traffic was queued before). */
            if (hdr.pfc.c3 != 0) {
                last_pause_set.execute(md.port_idx);
            }
            drop_copy();
        } else if (hdr.bridge.pkt_type == PKT_DATA) {
            md.paused = pause_check.execute(md.port_idx);
            md.flow_idx = md.epoch_idx ++ hdr.bridge.flow_hash[11:0];
            md.new_epoch = flow_epoch_roll.execute(md.flow_idx);
            md.old_src = flow_src_swap.execute(md.flow_idx);
            md.old_dst = flow_dst_swap.execute(md.flow_idx);
            md.old_ports = flow_ports_swap.execute(md.flow_idx);
            md.old_hop = flow_hop_swap.execute(md.flow_idx);
            /* The paper's XOR compare of the stored key: a gateway reads
             * at most 4 bytes + 12 bits, so the 12 bytes of key are
             * folded into one word first. */
            flow_key_xor.apply();
            if (md.new_epoch == 0) {
                flow_key_fold_addrs.apply();
                flow_key_fold.apply();
                if (md.key_diff != 0) {
                    md.collided = 1;
                }
            }
            if (md.new_epoch == 1 || md.collided == 1) {
                md.evict.packets = flow_pkts_restart.execute(md.flow_idx);
                md.evict.qdepth_sum = flow_qdepth_restart.execute(md.flow_idx);
                md.evict.paused = flow_paused_restart.execute(md.flow_idx);
            } else {
                flow_pkts_add.execute(md.flow_idx);
                flow_qdepth_add.execute(md.flow_idx);
                flow_paused_add.execute(md.flow_idx);
            }
            if (port_epoch_roll.execute(md.port_reg) == 1) {
                port_pkts_restart.execute(md.port_reg);
                port_qdepth_restart.execute(md.port_reg);
                port_paused_restart.execute(md.port_reg);
                pfc_frames_zero.execute(md.port_reg);
            } else {
                port_pkts_add.execute(md.port_reg);
                port_qdepth_add.execute(md.port_reg);
                port_paused_add.execute(md.port_reg);
            }
            if (pair_epoch_roll.execute(md.meter_idx) == 1) {
                pair_bytes_restart.execute(md.meter_idx);
            } else {
                pair_bytes_add.execute(md.meter_idx);
            }
            pair_seen_set.execute(md.pair_idx);
            if (md.paused == 1) {
                last_pause_set.execute(md.port_idx);
            }
            if (md.collided == 1) {
                /* The old entry goes to the CPU. */
                evictions.count(0);
                md.evict.setValid();
                md.evict.pkt_type = PKT_EVICT;
                md.evict.now = md.now;
                md.evict.src_addr = md.old_src;
                md.evict.dst_addr = md.old_dst;
                md.evict.ports = md.old_ports;
                md.evict.hop = md.old_hop;
                md.session = 1;
                eg_dprsr_md.mirror_type = MIRROR_EVICT;
            }
        } else if (hdr.bridge.pkt_type == PKT_POLL) {
            if (md.to_cpu == 1) {
                /* The CPU's copy: the poll as it came in, behind the
                 * bridged header (this switch's ingress port) with the
                 * time in place of the flow hash: the CPU reads the
                 * registers of the epochs up to it. */
                hdr.bridge.flow_hash = md.now;
            } else if (md.to_host == 1) {
                /* Traces stop at hosts. */
                drop_copy();
            } else {
                md.paused = pause_check.execute(md.port_idx);
                md.recent_pause = last_pause_recent.execute(md.port_idx);
                md.recent_traffic = pair_seen_recent.execute(md.pair_idx);
                if (EGRESS_RID(eg_intr_md) == 0) {
                    /* The victim-path copy: ask the next switch about PFC
                     * when this egress is paused. */
                    hdr.poll.poll_type = POLL_FLOW;
                    if (md.paused == 1 || md.recent_pause == 1) {
                        hdr.poll.poll_type = POLL_FLOW | POLL_PFC;
                    }
                } else if ((md.paused == 1 || md.recent_pause == 1) && md.recent_traffic == 1) {
                    hdr.poll.poll_type = POLL_PFC;
                } else {
                    drop_copy();
                }
                hdr.poll.ingress_port = hdr.bridge.ingress_port;
                hdr.poll.egress_port = eg_intr_md.egress_port;
                polls_sent.count(hdr.poll.poll_type[1:0]);
            }
        }
        if (md.to_cpu == 0 || hdr.bridge.pkt_type != PKT_POLL) {
            /* The bridged header stays behind but on the CPU's copy. */
            hdr.bridge.setInvalid();
        }
    }
}

control EgressDeparser(packet_out pkt,
                       inout eg_headers_t hdr,
                       in eg_metadata_t md,
                       in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Mirror() mirror;

    apply {
        if (eg_dprsr_md.mirror_type == MIRROR_EVICT) {
            mirror.emit<evict_h>(md.session, md.evict);
        }
        pkt.emit(hdr.evict);
        pkt.emit(hdr.bridge);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.poll);
        pkt.emit(hdr.pfc);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
    }
}

Pipeline(IngressParser(),
         Ingress(),
         IngressDeparser(),
         EgressParser(),
         Egress(),
         EgressDeparser()) pipe;

Switch(pipe) main;
