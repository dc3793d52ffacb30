/* egress_rid.p4: the smallest program that shows P4Testgen's Tofino model
 * misreading the egress. Ingress bridges {t = 0, v = 0x1234} before the
 * Ethernet header and sends the packet to port 5; egress sets the source
 * MAC to 1 when it reads v = 0x1234 (always, on a Tofino) and to 2
 * otherwise, and reads egress_rid. Reading egress_rid (which P4Testgen
 * cannot know) is enough for its egress parser to read the bridged header
 * and the frame at the wrong offset: its tests expect source MAC 2 and
 * show the misread in their traces. Without the egress_rid test it
 * expects 1. The cause, in p4c's testgen/targets/tofino/tofino/
 * cmd_stepper.cpp: egress_rid is initialised as an unknown of
 * "sixteenBitType", which is IR::Type_Bits::get(1). The programs under p4/
 * read the field through EGRESS_RID(), 0 in the -DP4TESTGEN builds.
 * TestEgressMisparseReproducer keeps the finding current.
 */
#include <core.p4>
#include <tna.p4>
header ethernet_h { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header bridge_h { bit<8> t; bit<16> v; }
struct ig_h { bridge_h bridge; ethernet_h ethernet; }
struct eg_h { bridge_h bridge; ethernet_h ethernet; }
struct md_t {}
parser IP(packet_in pkt, out ig_h hdr, out md_t md, out ingress_intrinsic_metadata_t ig_intr_md) {
  state start { pkt.extract(ig_intr_md); pkt.advance(PORT_METADATA_SIZE); pkt.extract(hdr.ethernet); transition accept; }
}
control I(inout ig_h hdr, inout md_t md, in ingress_intrinsic_metadata_t ig_intr_md, in ingress_intrinsic_metadata_from_parser_t p, inout ingress_intrinsic_metadata_for_deparser_t d, inout ingress_intrinsic_metadata_for_tm_t tm) {
  apply { hdr.bridge.setValid(); hdr.bridge.t = 0; hdr.bridge.v = 0x1234; tm.ucast_egress_port = 5; }
}
control ID(packet_out pkt, inout ig_h hdr, in md_t md, in ingress_intrinsic_metadata_for_deparser_t d) { apply { pkt.emit(hdr); } }
parser EP(packet_in pkt, out eg_h hdr, out md_t md, out egress_intrinsic_metadata_t eg_intr_md) {
  state start { pkt.extract(eg_intr_md);
    transition pb;
  }
  state pb { pkt.extract(hdr.bridge); pkt.extract(hdr.ethernet); transition accept; }
}
control E(inout eg_h hdr, inout md_t md, in egress_intrinsic_metadata_t eg_intr_md, in egress_intrinsic_metadata_from_parser_t p, inout egress_intrinsic_metadata_for_deparser_t d, inout egress_intrinsic_metadata_for_output_port_t o) {
  apply { if (eg_intr_md.egress_rid == 3) { hdr.ethernet.dst_addr = 9; }
    if (hdr.bridge.v == 0x1234) { hdr.ethernet.src_addr = 1; } else { hdr.ethernet.src_addr = 2; } }
}
control ED(packet_out pkt, inout eg_h hdr, in md_t md, in egress_intrinsic_metadata_for_deparser_t d) { apply { pkt.emit(hdr.ethernet); } }
Pipeline(IP(), I(), ID(), EP(), E(), ED()) pipe;
Switch(pipe) main;
