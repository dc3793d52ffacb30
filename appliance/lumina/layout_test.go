package lumina

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/internal/intent"
)

var updateLayout = flag.Bool("update-layout", false, "rewrite testdata/layout/*.golden")

// Keys Lumina's analyzer reads from a counter file (analyzer/counter/
// host_counter.py), by section and vendor.
var (
	luminaMLNXKeys = map[string][]string{
		SectionPort: {"port_rcv_packets", "port_xmit_packets"},
		SectionHW: {"packet_seq_err", "out_of_sequence", "duplicate_request", "implied_nak_seq_err", "np_cnp_sent",
			"np_ecn_marked_roce_packets", "rp_cnp_handled", "rx_icrc_encapsulated", "local_ack_timeout_err"},
	}
	luminaIntelKeys = map[string][]string{SectionHW: {"cnpSent", "RxECNMrkd", "cnpHandled"}}
)

// TestLuminaLayout runs Lumina's own example (one repeat) in the lab and
// reads the iteration back as Lumina's analyzer does: the file names
// (golden), the counter files' sections and keys, the message snapshot's
// QPs and the state snapshot's counters, which must satisfy Lumina's
// integrity relation (RoCE packets in = copies out = packets captured).
func TestLuminaLayout(t *testing.T) {
	tt, err := LoadTest(filepath.Join("testdata", "upstream", "example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tt.Spec.ResultPath = t.TempDir()
	tt.Spec.NumRepeats = 1
	// Iterations of an earlier run are removed, as Lumina does (from 0
	// on, while they exist).
	stale := filepath.Join(tt.Spec.ResultPath, "1")
	marker := filepath.Join(tt.Spec.ResultPath, "0", "old.txt")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := (&Runner{Test: tt, Lab: true}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{stale, marker} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s kept: %v", p, err)
		}
	}
	res := sum.Repeats[0]
	iter := filepath.Join(tt.Spec.ResultPath, "0")
	if res.LuminaDir != iter || !res.Valid {
		t.Fatalf("repeat %+v", res)
	}

	// The file names, against the golden list.
	var names []string
	err = filepath.WalkDir(iter, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(iter, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	got := strings.Join(names, "\n") + "\n"
	golden := filepath.Join("testdata", "layout", "example.golden")
	if *updateLayout {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-layout to write it)", err)
	}
	if got != string(want) {
		t.Errorf("layout:\n%s\nwant:\n%s", got, want)
	}
	read := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(iter, rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(read("example.yml"), tt.Raw) {
		t.Error("the test file's copy differs")
	}

	// Counter files: the sections and keys Lumina reads; finish - start
	// is what meta.json holds.
	m, err := luminaanalyzer.ReadMeta(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		start, finish string
		meta          map[string]uint64
	}{{LuminaReqStart, LuminaReqFinish, m.Requester}, {LuminaRspStart, LuminaRspFinish, m.Responder}} {
		start, err := ReadHostCounters(read(filepath.Join(LuminaRDMADir, side.start)))
		if err != nil {
			t.Fatal(err)
		}
		finish, err := ReadHostCounters(read(filepath.Join(LuminaRDMADir, side.finish)))
		if err != nil {
			t.Fatal(err)
		}
		for sec, keys := range luminaMLNXKeys {
			for _, k := range keys {
				a, okA := start[sec][k]
				b, okB := finish[sec][k]
				if !okA || !okB {
					t.Errorf("%s: %s.%s missing", side.finish, sec, k)
					continue
				}
				if sec == SectionHW && b-a != side.meta[k] {
					t.Errorf("%s: %s went %d -> %d, meta.json says %d", side.finish, k, a, b, side.meta[k])
				}
			}
		}
		var rx, tx bool
		for k := range finish[SectionEthtool] {
			rx = rx || (strings.Contains(k, "discard") && strings.Contains(k, "rx"))
			tx = tx || (strings.Contains(k, "discard") && strings.Contains(k, "tx"))
		}
		if !rx || !tx {
			t.Errorf("%s: ethtool-counters without rx and tx discards: %v", side.finish, finish[SectionEthtool])
		}
		if d := finish[SectionPort]["port_rcv_packets"] - start[SectionPort]["port_rcv_packets"]; d != side.meta["rx_packets"] {
			t.Errorf("%s: port_rcv_packets rose by %d, rx_packets by %d", side.finish, d, side.meta["rx_packets"])
		}
	}
	// The example drops two packets: the responder saw two gaps.
	if m.Responder["out_of_sequence"] != 2 {
		t.Errorf("responder out_of_sequence %d, want 2", m.Responder["out_of_sequence"])
	}

	// The message snapshot: one entry per QP, keyed as Lumina's switch
	// controller writes them, the sender being the requester (WRITE).
	var qps []map[string]any
	if err := yaml.Unmarshal(read(filepath.Join(LuminaSwitchDir, LuminaMessageSnapshot)), &qps); err != nil {
		t.Fatal(err)
	}
	if len(qps) != len(m.Conns) || len(qps) != tt.NumQPs {
		t.Fatalf("%d QPs in the snapshot, %d connections", len(qps), len(m.Conns))
	}
	for i, q := range qps {
		var keys []string
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != "ip_rcv,ip_snd,psn_rcv,psn_snd,qpn_rcv,qpn_snd,rcv_sw_port,snd_sw_port" {
			t.Fatalf("QP %d keys %v", i, keys)
		}
		c := m.Conns[i]
		if q["ip_snd"] != c.RequesterIP.String() || q["psn_snd"] != int(c.RequesterIPSN) || q["qpn_rcv"] != int(c.ResponderQPN) ||
			q["snd_sw_port"] != tt.Spec.Requester.NIC.SwitchPort || q["rcv_sw_port"] != tt.Spec.Responder.NIC.SwitchPort {
			t.Errorf("QP %d: %v, connection %+v", i, q, c)
		}
	}

	// The state snapshot, as Lumina's integrity check reads it.
	var st struct {
		Counter struct{ Ingress, Egress map[int]uint64 }
		Events  []map[string]any `yaml:"event-table"`
	}
	if err := yaml.Unmarshal(read(filepath.Join(LuminaSwitchDir, LuminaStateSnapshot)), &st); err != nil {
		t.Fatal(err)
	}
	p := portsOf(&tt.Spec)
	in := st.Counter.Ingress[p.req] + st.Counter.Ingress[p.resp]
	out := st.Counter.Egress[p.reqMirror] + st.Counter.Egress[p.respMirror]
	if in != out || out != res.Packets || in == 0 {
		t.Errorf("ingress %d, mirrored %d, captured %d: %+v", in, out, res.Packets, st.Counter)
	}
	if len(st.Events) != len(m.Entries) {
		t.Errorf("%d event-table entries, %d entries", len(st.Events), len(m.Entries))
	}
	// The entries are the ones Lumina's controller writes for the file:
	// one per event, keyed on the receiver's QPN, the sender's initial
	// PSN + psn and the iteration.
	if len(m.Entries) != len(tt.Intents) {
		t.Fatalf("%d entries for %d events", len(m.Entries), len(tt.Intents))
	}
	for i, e := range m.Entries {
		in, c := tt.Intents[i], m.Conns[tt.Intents[i].QP]
		if e.Intent != i || e.Key.DstQPN != c.ResponderQPN || e.Key.PSN != (c.RequesterIPSN+uint32(in.PSN))&0xffffff ||
			int(e.Key.Iter) != in.Iter || e.Event != in.Type {
			t.Errorf("entry %d %v for event %v of connection %+v", i, e, in, c)
		}
	}
}

// TestHostCountersVendors: an E810 is laid out with irdma's names and no
// port counters; names YAML would misread are quoted; the file reads back.
func TestHostCountersVendors(t *testing.T) {
	c := map[string]uint64{"np_cnp_sent": 3, "np_ecn_marked_roce_packets": 4, "rp_cnp_handled": 5, "rx_packets": 8, "tx_nobuf": 1}
	for _, tc := range []struct {
		typ  string
		keys map[string][]string
	}{{"E810", luminaIntelKeys}, {"CX5", luminaMLNXKeys}, {"soft", luminaMLNXKeys}} {
		h := SoftHostCounters(tc.typ, c)
		h.Ethtool = append(h.Ethtool, NamedCount{"yes", 7}, NamedCount{"rx queue 0: packets", 9})
		var b bytes.Buffer
		if _, err := h.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		m, err := ReadHostCounters(b.Bytes())
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.typ, err, b.String())
		}
		for sec, keys := range tc.keys {
			for _, k := range keys {
				if _, ok := m[sec][k]; !ok {
					t.Errorf("%s: %s.%s missing:\n%s", tc.typ, sec, k, b.String())
				}
			}
		}
		if _, ok := m[SectionPort]; ok != (tc.typ != "E810") {
			t.Errorf("%s: port-counters present %v", tc.typ, ok)
		}
		e := m[SectionEthtool]
		if e["yes"] != 7 || e["rx queue 0: packets"] != 9 || e["tx_discards"] != 1 || e["rx_packets"] != 8 {
			t.Errorf("%s: ethtool %v", tc.typ, e)
		}
	}
	if h := SoftHostCounters("E810", c); h.HW[3] != (NamedCount{"cnpSent", 3}) || h.HW[0] != (NamedCount{"RxECNMrkd", 4}) {
		t.Errorf("E810 hw %v", h.HW)
	}
}

// TestMessageSnapshotRead: READ QPs list the responder as the sender of
// data, with the requester's PSN (the read responses carry it).
func TestMessageSnapshotRead(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	conns := []intent.Conn{
		{RequesterIP: a, RequesterQPN: 11, RequesterIPSN: 100, ResponderIP: b, ResponderQPN: 21, ResponderIPSN: 200},
		{RequesterIP: a, RequesterQPN: 12, RequesterIPSN: 101, ResponderIP: b, ResponderQPN: 22, ResponderIPSN: 201},
	}
	got := MessageSnapshot(conns, intent.VerbSendRead, 1, 1, 2)
	want := []QPInfo{
		{IPSnd: "10.0.0.1", QPNSnd: 11, PSNSnd: 100, SndSwPort: 1, IPRcv: "10.0.0.2", QPNRcv: 21, PSNRcv: 200, RcvSwPort: 2},
		{IPSnd: "10.0.0.2", QPNSnd: 22, PSNSnd: 101, SndSwPort: 2, IPRcv: "10.0.0.1", QPNRcv: 12, PSNRcv: 201, RcvSwPort: 1},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v", got)
	}
}

// FuzzHostCounters: whatever a host prints for its counters, the parser
// keeps only counters, and the counter file written from them reads back
// to the same sections, names and values (what Lumina's analyzer gets).
func FuzzHostCounters(f *testing.F) {
	f.Add([]byte("hw_counters out_of_sequence 3\ncounters port_rcv_packets 5\nethtool NIC statistics:\nethtool      rx_discards_phy: 2\n"))
	f.Add([]byte("ethtool      rx_queue_0_packets: 12\nethtool      tx-0.bytes: 4\nethtool      [0]: 1\nhw_counters np_cnp_sent x\n"))
	f.Add([]byte("counters yes 1\nhw_counters null 2\nethtool      rx queue 0: packets: 9\nethtool 1e3: 4\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, vendor := range []string{VendorMLNX, VendorIntel} {
			h, _ := ParseHostCounters(vendor, out)
			var b bytes.Buffer
			if _, err := h.WriteTo(&b); err != nil {
				t.Fatal(err)
			}
			m, err := ReadHostCounters(b.Bytes())
			if err != nil {
				t.Fatalf("%v reading back:\n%s", err, b.String())
			}
			check := func(sec string, cs []NamedCount) {
				if len(cs) == 0 {
					if _, ok := m[sec]; ok {
						t.Fatalf("empty section %s written", sec)
					}
					return
				}
				if len(m[sec]) != len(cs) {
					t.Fatalf("%s: %d counters written, %d read:\n%s", sec, len(cs), len(m[sec]), b.String())
				}
				for _, c := range cs {
					if v, ok := m[sec][c.Name]; !ok || v != c.Value {
						t.Fatalf("%s: %q = %d written, read %d (%v):\n%s", sec, c.Name, c.Value, v, ok, b.String())
					}
				}
			}
			if vendor == VendorMLNX {
				check(SectionPort, h.Port)
			}
			check(SectionHW, h.HW)
			check(SectionEthtool, h.Ethtool)
		}
	})
}
