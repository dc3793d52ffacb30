package lumina

// Lumina's own result layout. Beside its own result directory
// (result-path/<timestamp>/<repeat>/), `lumina run` writes each iteration
// as Lumina's orchestrator leaves it, so that Lumina's offline analyzer
// (lumina-analyzer) and its e2e checks (test_gbn, test_cnp with -v) read
// our results unchanged:
//
//	result-path/<iter>/
//	  <test file>                         the test file, as read
//	  pcap-result/<dump-filename>         each mirror's capture
//	  pcap-result/<aggregate-pcap-filename> the merged trace
//	  switch-result/switch_message_snapshot.yml  the QPs the requester reported
//	  switch-result/switch_state_snapshot.yml    per-port counters, event table
//	  rdma-result/{requester,responder}_counter_{start,finish}.yml
//
// The names, sections and keys are those Lumina's code writes and reads
// (orchestrator/host.py and switch.py for the names, counter-dump for the
// counter files, the switch controller for the snapshots, analyzer/counter
// for what is read back).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// Directory and file names of an iteration in Lumina's layout.
const (
	LuminaPcapDir         = "pcap-result"
	LuminaSwitchDir       = "switch-result"
	LuminaRDMADir         = "rdma-result"
	LuminaMessageSnapshot = "switch_message_snapshot.yml"
	LuminaStateSnapshot   = "switch_state_snapshot.yml"
	LuminaReqStart        = "requester_counter_start.yml"
	LuminaRspStart        = "responder_counter_start.yml"
	LuminaReqFinish       = "requester_counter_finish.yml"
	LuminaRspFinish       = "responder_counter_finish.yml"
)

// Sections of a counter file, as Lumina's counter dump names them.
const (
	SectionPort    = "port-counters"    // /sys/class/infiniband/<dev>/ports/<n>/counters (mlx5 only)
	SectionHW      = "hw-counters"      // .../hw_counters
	SectionEthtool = "ethtool-counters" // ethtool -S <if-name>
)

// Vendors as Lumina's counter dump and analyzer tell NICs apart.
const (
	VendorMLNX  = "MLNX"
	VendorIntel = "Intel"
)

// NICVendor is Lumina's vendor of a nic.type. A type Lumina does not know
// (the lab's own profiles) counts as MLNX: the soft RNIC keeps mlx5's
// counter names.
func NICVendor(typ string) string {
	switch strings.ToUpper(typ) {
	case "E810", "XL710":
		return VendorIntel
	}
	return VendorMLNX
}

// NamedCount is one counter of a section.
type NamedCount struct {
	Name  string
	Value uint64
}

// HostCounters is one snapshot of an RDMA host's counters, by section.
// An empty section is left out of the file (Lumina's analyzer cannot
// read an empty one); Ethtool is empty when the NIC gave no ethtool -S.
type HostCounters struct {
	Vendor  string
	Port    []NamedCount
	HW      []NamedCount
	Ethtool []NamedCount
}

// Flat is the port and hw counters in one map (what meta.json and the
// appliance's analyzers read).
func (h HostCounters) Flat() map[string]uint64 {
	if len(h.Port)+len(h.HW) == 0 {
		return nil
	}
	m := make(map[string]uint64, len(h.Port)+len(h.HW))
	for _, s := range [][]NamedCount{h.Port, h.HW} {
		for _, c := range s {
			m[c.Name] = c.Value
		}
	}
	return m
}

// plainKey is a counter name YAML reads back as the same string without
// quotes.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.\-\[\]]*$`)

func yamlKey(s string) string {
	if plainKey.MatchString(s) && !yamlReserved(s) {
		return s
	}
	// A double-quoted YAML scalar is a JSON string.
	return strconv.Quote(s)
}

// yamlReserved are plain words YAML would read as something else than a
// string (booleans, null).
func yamlReserved(s string) bool {
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return true
	}
	return false
}

// WriteTo writes the snapshot as Lumina's counter dump does: one section
// per source, two-space indented "name: value" lines.
func (h HostCounters) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	section := func(name string, cs []NamedCount) {
		if len(cs) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s:\n", name)
		for _, c := range cs {
			fmt.Fprintf(&b, "  %s: %d\n", yamlKey(c.Name), c.Value)
		}
	}
	if h.Vendor != VendorIntel {
		section(SectionPort, h.Port)
	}
	section(SectionHW, h.HW)
	section(SectionEthtool, h.Ethtool)
	n, err := w.Write(b.Bytes())
	return int64(n), err
}

// ReadHostCounters reads a counter file back, section by section.
func ReadHostCounters(data []byte) (map[string]map[string]uint64, error) {
	var m map[string]map[string]uint64
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// mlx5HW are the soft RNIC's counters that mlx5 keeps in hw_counters under
// the same names.
var mlx5HW = []string{
	"duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err", "np_cnp_sent",
	"np_ecn_marked_roce_packets", "out_of_buffer", "out_of_sequence", "packet_seq_err",
	"req_cqe_error", "req_cqe_flush_error", "resp_cqe_error", "resp_cqe_flush_error",
	"rnr_nak_retry_err", "rp_cnp_handled", "rp_cnp_ignored", "rx_icrc_encapsulated",
}

// irdmaHW maps irdma's hw_counters names (those Lumina reads for an E810)
// to the soft RNIC's.
var irdmaHW = []struct{ irdma, soft string }{
	{"RxECNMrkd", "np_ecn_marked_roce_packets"},
	{"cnpHandled", "rp_cnp_handled"},
	{"cnpIgnored", "rp_cnp_ignored"},
	{"cnpSent", "np_cnp_sent"},
}

// SoftHostCounters lays a soft RNIC's counters out as the NIC type's
// driver shows them. The port counters are mlx5's (port_*_data in units
// of 4 bytes, as the IB port counters count). The ethtool section is the
// soft port's own statistics, the device's netdev-level counts: packets
// and bytes each way, rx_discards (malformed or undeliverable packets it
// dropped) and tx_discards (packets it could not transmit for want of a
// buffer, its tx_nobuf).
func SoftHostCounters(nicType string, c map[string]uint64) HostCounters {
	h := HostCounters{Vendor: NICVendor(nicType)}
	if h.Vendor == VendorIntel {
		for _, m := range irdmaHW {
			h.HW = append(h.HW, NamedCount{m.irdma, c[m.soft]})
		}
	} else {
		h.Port = []NamedCount{
			{"port_rcv_data", c["rx_bytes"] / 4},
			{"port_rcv_packets", c["rx_packets"]},
			{"port_xmit_data", c["tx_bytes"] / 4},
			{"port_xmit_packets", c["tx_packets"]},
		}
		for _, n := range mlx5HW {
			h.HW = append(h.HW, NamedCount{n, c[n]})
		}
	}
	h.Ethtool = []NamedCount{
		{"rx_packets", c["rx_packets"]},
		{"rx_bytes", c["rx_bytes"]},
		{"rx_discards", c["rx_discards"]},
		{"tx_packets", c["tx_packets"]},
		{"tx_bytes", c["tx_bytes"]},
		{"tx_discards", c["tx_nobuf"]},
	}
	return h
}

// maxCounterName bounds a counter's name: no driver names one anywhere
// near it, and quoted (four characters a control byte) it stays within
// the 1024 characters YAML allows an implicit key.
const maxCounterName = 200

// ParseHostCounters reads what hostCounterScript prints: "<dir> <name>
// <value>" lines for the sysfs counters (dir hw_counters or counters)
// and "ethtool <line>" for each line of ethtool -S. Lines that are not a
// counter, names that are not UTF-8 or longer than maxCounterName, and a
// name seen again in its section (a YAML mapping holds a key once) are
// skipped and counted in bad.
func ParseHostCounters(vendor string, out []byte) (h HostCounters, bad int) {
	h.Vendor = vendor
	seen := map[string]bool{}
	add := func(sec string, list *[]NamedCount, k string, n uint64) {
		if !utf8.ValidString(k) || len(k) > maxCounterName || seen[sec+"\x00"+k] {
			bad++
			return
		}
		seen[sec+"\x00"+k] = true
		*list = append(*list, NamedCount{k, n})
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		src, rest, ok := strings.Cut(line, " ")
		if !ok {
			bad++
			continue
		}
		if src == "ethtool" {
			// ethtool -S: a header line ("NIC statistics:") then
			// "name: value" lines.
			k, v, ok := strings.Cut(strings.TrimSpace(rest), ": ")
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if !ok || err != nil || k == "" {
				if rest != "NIC statistics:" {
					bad++
				}
				continue
			}
			add(SectionEthtool, &h.Ethtool, strings.TrimSpace(k), n)
			continue
		}
		k, v, ok := strings.Cut(rest, " ")
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if !ok || err != nil || k == "" || strings.ContainsAny(k, " /") {
			bad++
			continue
		}
		switch src {
		case "hw_counters":
			add(SectionHW, &h.HW, k, n)
		case "counters":
			add(SectionPort, &h.Port, k, n)
		default:
			bad++
		}
	}
	return h, bad
}

// QPInfo is one QP of the switch message snapshot, keyed as Lumina's
// switch controller writes it (sorted, as PyYAML dumps a dict). The
// sender is the QP that sends the data: the requester for SEND and
// WRITE, the responder for READ, whose data PSNs are the requester's.
type QPInfo struct {
	IPRcv     string `yaml:"ip_rcv"`
	IPSnd     string `yaml:"ip_snd"`
	PSNRcv    uint32 `yaml:"psn_rcv"`
	PSNSnd    uint32 `yaml:"psn_snd"`
	QPNRcv    uint32 `yaml:"qpn_rcv"`
	QPNSnd    uint32 `yaml:"qpn_snd"`
	RcvSwPort int    `yaml:"rcv_sw_port"`
	SndSwPort int    `yaml:"snd_sw_port"`
}

// MessageSnapshot turns the connections into Lumina's QP list: QPs from
// sendQPs on carry READ when the verb is send_read, every QP when it is
// read.
func MessageSnapshot(conns []intent.Conn, verb intent.Verb, sendQPs, reqPort, respPort int) []QPInfo {
	out := make([]QPInfo, 0, len(conns))
	for i, c := range conns {
		read := verb == intent.VerbRead || (verb == intent.VerbSendRead && i >= sendQPs)
		q := QPInfo{IPSnd: c.RequesterIP.String(), QPNSnd: c.RequesterQPN, PSNSnd: c.RequesterIPSN, SndSwPort: reqPort,
			IPRcv: c.ResponderIP.String(), QPNRcv: c.ResponderQPN, PSNRcv: c.ResponderIPSN, RcvSwPort: respPort}
		if read {
			q = QPInfo{IPSnd: c.ResponderIP.String(), QPNSnd: c.ResponderQPN, PSNSnd: c.RequesterIPSN, SndSwPort: respPort,
				IPRcv: c.RequesterIP.String(), QPNRcv: c.RequesterQPN, PSNRcv: c.ResponderIPSN, RcvSwPort: reqPort}
		}
		out = append(out, q)
	}
	return out
}

// StateSnapshot is the switch state snapshot: per switch port, the RoCE
// packets that came in (ingress) and the packets that went out (egress),
// and the event table.
type StateSnapshot struct {
	Counter    PortCounters `yaml:"counter"`
	EventTable []EventEntry `yaml:"event-table"`
}

// PortCounters are keyed by switch port number.
type PortCounters struct {
	Egress  map[int]uint64 `yaml:"egress"`
	Ingress map[int]uint64 `yaml:"ingress"`
}

// EventEntry is one entry of the injector's event table: its match key
// and its action, with the hits the injector counted.
type EventEntry struct {
	Key  map[string]any `yaml:"key"`
	Data map[string]any `yaml:"data"`
}

// Ports of the four hosts on the switch, as the test file gives them.
type switchPorts struct{ req, resp, reqMirror, respMirror int }

func portsOf(s *TestSpec) switchPorts {
	return switchPorts{s.Requester.NIC.SwitchPort, s.Responder.NIC.SwitchPort,
		s.RequesterMirror.NIC.SwitchPort, s.ResponderMirror.NIC.SwitchPort}
}

// stateSnapshot counts as Lumina's switch program does: ingress is the
// RoCE packets received on a port (what it mirrors), egress what left a
// port (forwarded packets on the hosts' ports, copies on the mirrors').
// The injector's ports are matched by name (the lab's: requester,
// responder and the mirrors' names); failing that, traffic ports in
// order are requester then responder, mirror ports requester-mirror then
// responder-mirror.
func stateSnapshot(st mirror.InjectorStats, p switchPorts, entries []intent.Entry, hits []uint64) StateSnapshot {
	ss := StateSnapshot{Counter: PortCounters{Egress: map[int]uint64{}, Ingress: map[int]uint64{}}, EventTable: []EventEntry{}}
	for _, port := range []int{p.req, p.resp, p.reqMirror, p.respMirror} {
		ss.Counter.Egress[port], ss.Counter.Ingress[port] = 0, 0
	}
	var traffic, mirrors []mirror.PortStats
	for _, ps := range st.Ports {
		if ps.Role == "mirror" {
			mirrors = append(mirrors, ps)
		} else {
			traffic = append(traffic, ps)
		}
	}
	place := func(list []mirror.PortStats, names [2]string, ports [2]int) {
		used := make([]bool, len(list))
		for k, name := range names {
			for i, ps := range list {
				if !used[i] && ps.Name == name {
					used[i] = true
					ss.Counter.Ingress[ports[k]] += ps.RxRoCE
					ss.Counter.Egress[ports[k]] += ps.TxPackets
					names[k] = ""
				}
			}
		}
		// Unnamed ports, in order, for the roles still unfilled.
		k := 0
		for i, ps := range list {
			if used[i] {
				continue
			}
			for k < 2 && names[k] == "" {
				k++
			}
			if k == 2 {
				break
			}
			ss.Counter.Ingress[ports[k]] += ps.RxRoCE
			ss.Counter.Egress[ports[k]] += ps.TxPackets
			k++
		}
	}
	place(traffic, [2]string{"requester", "responder"}, [2]int{p.req, p.resp})
	place(mirrors, [2]string{"requester-mirror", "responder-mirror"}, [2]int{p.reqMirror, p.respMirror})
	for i, e := range entries {
		k := e.Key
		ee := EventEntry{Key: map[string]any{"hdr.ipv4.src_addr": netip.AddrFrom16(k.Src).Unmap().String(),
			"hdr.ipv4.dst_addr": netip.AddrFrom16(k.Dst).Unmap().String(), "hdr.roce.destination_qp": k.DstQPN,
			"ig_md.iteration": k.Iter},
			Data: map[string]any{"action_name": "SwitchIngress." + actionName(e.Event)}}
		if k.PSN != intent.AnyPSN {
			ee.Key["hdr.roce.packet_seqnum"] = k.PSN
		}
		if i < len(hits) {
			ee.Data["hits"] = hits[i]
		}
		ss.EventTable = append(ss.EventTable, ee)
	}
	return ss
}

// actionName is the Lumina switch program's action for an event.
func actionName(ev mirror.EventType) string {
	switch ev {
	case mirror.EventDrop:
		return "drop"
	case mirror.EventECN:
		return "mark_ecn"
	case mirror.EventBitError:
		return "bit_error"
	}
	return "none"
}

// MirrorDump is one mirror's capture: the files its dumper wrote (one
// per receive queue) and the test's dump-filename for it. A single file
// is saved under dump-filename, as Lumina's dumper names it; several keep
// their own names.
type MirrorDump struct {
	DumpFilename string
	Paths        []string
}

// LuminaIter is what one iteration's directory is written from.
type LuminaIter struct {
	// Dir is result-path/<iter>.
	Dir string
	// TestName and TestFile are the test file's base name and bytes.
	TestName string
	TestFile []byte
	// Merged is the merged trace, saved under AggregateName.
	Merged, AggregateName string
	// Dumps are each mirror's captures.
	Dumps []MirrorDump
	// Messages and State are the switch's snapshots.
	Messages []QPInfo
	State    StateSnapshot
	// Counters of the requester and responder at start and finish;
	// nil when the host gave none (the file is then not written).
	ReqStart, ReqFinish, RespStart, RespFinish *HostCounters
}

// WriteLuminaIter writes one iteration in Lumina's layout, replacing what
// a previous run left in that directory.
func WriteLuminaIter(it *LuminaIter) error {
	if err := os.RemoveAll(it.Dir); err != nil {
		return err
	}
	for _, d := range []string{LuminaPcapDir, LuminaSwitchDir, LuminaRDMADir} {
		if err := os.MkdirAll(filepath.Join(it.Dir, d), 0o755); err != nil {
			return err
		}
	}
	var errs []error
	if it.TestName != "" && it.TestFile != nil {
		errs = append(errs, os.WriteFile(filepath.Join(it.Dir, it.TestName), it.TestFile, 0o644))
	}
	if it.Merged != "" {
		errs = append(errs, linkOrCopy(it.Merged, filepath.Join(it.Dir, LuminaPcapDir, it.AggregateName)))
	}
	used := map[string]bool{it.AggregateName: true}
	for i, md := range it.Dumps {
		for _, p := range md.Paths {
			name := filepath.Base(p)
			if len(md.Paths) == 1 && md.DumpFilename != "" {
				name = filepath.Base(md.DumpFilename)
			}
			// Two dumpers may name their files alike: keep both.
			if used[name] {
				name = fmt.Sprintf("%d-%s", i, name)
			}
			used[name] = true
			errs = append(errs, linkOrCopy(p, filepath.Join(it.Dir, LuminaPcapDir, name)))
		}
	}
	errs = append(errs, writeYAML(filepath.Join(it.Dir, LuminaSwitchDir, LuminaMessageSnapshot), it.Messages))
	errs = append(errs, writeYAML(filepath.Join(it.Dir, LuminaSwitchDir, LuminaStateSnapshot), it.State))
	for _, c := range []struct {
		name string
		h    *HostCounters
	}{{LuminaReqStart, it.ReqStart}, {LuminaReqFinish, it.ReqFinish}, {LuminaRspStart, it.RespStart}, {LuminaRspFinish, it.RespFinish}} {
		if c.h == nil {
			continue
		}
		var b bytes.Buffer
		if _, err := c.h.WriteTo(&b); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(it.Dir, LuminaRDMADir, c.name), b.Bytes(), 0o644))
	}
	return errors.Join(errs...)
}

func writeYAML(path string, v any) error {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// linkOrCopy puts src at dst: a hard link when both are on one file
// system (the traces can be large), a copy otherwise.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	// Never through an existing name: it could be a link to src.
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// removeOldIters removes result-path/0, 1, ... as long as they are
// directories, as Lumina's orchestrator does before a run, so that no
// iteration of an earlier run is read as this one's.
func removeOldIters(resultPath string) error {
	for i := 0; ; i++ {
		d := filepath.Join(resultPath, strconv.Itoa(i))
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			return nil
		}
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
}

// sortCounts orders a section by name (sysfs lists in no fixed order).
func sortCounts(cs []NamedCount) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
}
