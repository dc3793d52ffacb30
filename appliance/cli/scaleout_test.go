package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rdma-appliance/appliance/appliance/lumina"
	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/netns"
	"github.com/rdma-appliance/appliance/dumper"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

// afpOpts shapes the scale-out tests' AF_PACKET ports: the kernel's
// shortest block timeout so lone frames are not held back, and enough
// blocks for a process starved a quarter of a second. Under a steady
// stream the kernel retires a block per timeout however full it is, so
// a ring holds blocks x timeout of a stalled poller: the 16 blocks this
// had before overflowed after 16 ms, and CI, compiling and testing on two
// cores, lost a DTA Append WRITE that way.
const afpOpts = ",timeout=1,blocks=256,blocksize=64K"

// TestLuminaScaleOut runs a Lumina test across five machines, each a
// network namespace: the software injector, the requester's and the
// responder's hosts and a pool of two dumpers. Packets travel only over
// veth pairs between the injector and the others (AF_PACKET ports);
// everything else goes over a control network: `appliance lumina run`,
// in this process as on an operator's machine, drives the injector and
// the dumpers through their HTTP control and starts the traffic
// generator's two sides through an executor that stands for SSH (`ip
// netns exec` on the host the test file names), which exchange their
// metadata over TCP and push it to the injector. The merged trace must
// pass integrity, and the injector's per-packet round-robin must have
// put half the copies on each dumper.
func TestLuminaScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("short: eight processes across network namespaces")
	}
	n := newScaleNet(t, "lu")
	inj, req, resp := n.host("inj"), n.host("req"), n.host("resp")
	dumpers := []*scaleHost{n.host("dmpa"), n.host("dmpb")}
	names := []string{"requester-mirror", "responder-mirror"}
	reqMAC, respMAC := "02:53:4c:00:00:01", "02:53:4c:00:00:02"
	n.link(req, "data", reqMAC, inj, "req", "02:53:4c:00:01:01")
	n.link(resp, "data", respMAC, inj, "resp", "02:53:4c:00:01:02")
	for i, d := range dumpers {
		n.link(inj, fmt.Sprintf("mir%d", i), fmt.Sprintf("02:53:4c:00:01:1%d", i), d, "data", fmt.Sprintf("02:53:4c:00:00:1%d", i))
	}
	dir := t.TempDir()
	injFile := filepath.Join(dir, "injector.yml")
	spec := fmt.Sprintf(`listen: %s:9100
balance: wrr
ports:
  - {name: requester, role: traffic, port: "afpacket:req%[2]s", addrs: [10.0.0.254]}
  - {name: responder, role: traffic, port: "afpacket:resp%[2]s", addrs: [10.0.1.254]}
  - {name: %[5]s, role: mirror, port: "afpacket:mir0%[2]s", weight: 1}
  - {name: %[6]s, role: mirror, port: "afpacket:mir1%[2]s", weight: 1}
routes:
  - {prefix: 10.0.0.1, port: requester, mac: "%[3]s"}
  - {prefix: 10.0.1.1, port: responder, mac: "%[4]s"}
`, inj.IP, afpOpts, reqMAC, respMAC, names[0], names[1])
	if err := os.WriteFile(injFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	injector := n.start(inj, "injector", "inject", "run", "-f", injFile)
	var dumps []*scaleProc
	for i, d := range dumpers {
		dumps = append(dumps, n.start(d, names[i], "dump", "--port", "afpacket:data"+afpOpts, "--listen", d.IP+":9200",
			"--name", names[i], "--dir", filepath.Join(dir, names[i])))
	}
	waitHealthy(t, injector, inj.IP+":9100", 20*time.Second)
	for i, d := range dumpers {
		waitHealthy(t, dumps[i], d.IP+":9200", 20*time.Second)
	}

	// The test file: the ready-made 20 KB fast-retransmission sweep, its
	// machines' control-ips pointed at the namespaces.
	tt, err := lumina.LoadTest(filepath.Join("..", "lumina", "testdata", "tests", "fast-retrans-20k.yml"))
	if err != nil {
		t.Fatal(err)
	}
	s := tt.Spec
	s.ResultPath = filepath.Join(dir, "results")
	s.Switch.ControlIP, s.Switch.ListenPort = inj.IP, 9100
	s.Requester.ControlIP, s.Responder.ControlIP = req.IP, resp.IP
	s.RequesterMirror.ControlIP, s.ResponderMirror.ControlIP = dumpers[0].IP, dumpers[1].IP
	s.Requester.NIC.IPList, s.Responder.NIC.IPList = []string{"10.0.0.1"}, []string{"10.0.1.1"}
	data, err := lumina.MarshalTest(&s)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "test.yml")
	if err := os.WriteFile(testFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	old := remoteExec
	remoteExec = netnsExec{n: n, hosts: map[string]*scaleHost{req.IP: req, resp.IP: resp}}
	defer func() { remoteExec = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"--token-file", n.token, "lumina", "run", "-f", testFile, "--json", "--dumper-port", "9200", "--setup=false",
		"--requester-device", "--nic afpacket:data" + afpOpts + " --gid 10.0.0.1",
		"--responder-device", "--nic afpacket:data" + afpOpts + " --gid 10.0.1.1"}, &out, &errOut)
	var sum lumina.Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || len(sum.Repeats) != 1 {
		t.Fatalf("lumina run: exit %d, summary %v\n%s\n%s", code, err, out.String(), errOut.String())
	}
	rep := sum.Repeats[0]
	if code != 0 || !rep.Valid || rep.Traffic != "ok" || rep.Error != "" {
		t.Fatalf("lumina run: exit %d, repeat %+v\n%s", code, rep, errOut.String())
	}

	// Integrity: every copy the injector mirrored is in the merged trace,
	// in sequence.
	var integ trace.Report
	readJSON(t, filepath.Join(rep.Dir, "integrity.json"), &integ)
	meta, err := luminaanalyzer.ReadMeta(rep.Dir)
	if err != nil {
		t.Fatal(err)
	}
	injStats := meta.Injector
	if !integ.Valid || integ.Missing != 0 || integ.Duplicates != 0 || integ.Packets == 0 || integ.Packets != injStats.Mirrored {
		t.Fatalf("integrity %+v, injector mirrored %d", integ, injStats.Mirrored)
	}
	// The requester pushed the connections to the injector over the
	// control network: each of the sweep's drops hit its packet once.
	if len(meta.Hits) != len(s.Traffic.DataPktEvents) {
		t.Fatalf("%d entries hit %v for %d events", len(meta.Entries), meta.Hits, len(s.Traffic.DataPktEvents))
	}
	for i, h := range meta.Hits {
		if h != 1 {
			t.Fatalf("entry %d (%+v) hit %d times", i, meta.Entries[i], h)
		}
	}
	// The pool: both dumpers wrote copies, half each (per-packet
	// round-robin of weight 1:1), none lost, and their files came over
	// HTTP to the run directory.
	var results []dumper.Result
	readJSON(t, filepath.Join(rep.Dir, "dumpers.json"), &results)
	if len(results) != 2 {
		t.Fatalf("dumpers.json: %d results", len(results))
	}
	var written []uint64
	for i, r := range results {
		if r.Name != names[i] || r.Written == 0 || r.Lost() != 0 {
			t.Fatalf("dumper %d: %+v", i, r)
		}
		written = append(written, r.Written)
		files, _ := filepath.Glob(filepath.Join(rep.Dir, "dumps", names[i]+"-*.pcap"))
		if len(files) == 0 {
			t.Fatalf("no files fetched from %s", names[i])
		}
	}
	if written[0]+written[1] != integ.Packets || max(written[0], written[1])-min(written[0], written[1]) > 1 {
		t.Fatalf("dumpers wrote %v of %d copies: not spread half and half", written, integ.Packets)
	}
	// Lumina's layout, from the remote mode: the injector's ports by
	// role, so Lumina's integrity relation holds on the state snapshot;
	// no counter files, since these hosts have no RDMA device in sysfs.
	if rep.LuminaDir != filepath.Join(s.ResultPath, "0") {
		t.Fatalf("lumina dir %q", rep.LuminaDir)
	}
	var state struct {
		Counter struct{ Ingress, Egress map[int]uint64 }
	}
	if err := yamlFile(filepath.Join(rep.LuminaDir, lumina.LuminaSwitchDir, lumina.LuminaStateSnapshot), &state); err != nil {
		t.Fatal(err)
	}
	in := state.Counter.Ingress[s.Requester.NIC.SwitchPort] + state.Counter.Ingress[s.Responder.NIC.SwitchPort]
	mirrored := state.Counter.Egress[s.RequesterMirror.NIC.SwitchPort] + state.Counter.Egress[s.ResponderMirror.NIC.SwitchPort]
	if in != integ.Packets || mirrored != integ.Packets {
		t.Fatalf("state snapshot: %d in, %d mirrored, %d captured: %+v", in, mirrored, integ.Packets, state.Counter)
	}
	var qps []map[string]any
	if err := yamlFile(filepath.Join(rep.LuminaDir, lumina.LuminaSwitchDir, lumina.LuminaMessageSnapshot), &qps); err != nil || len(qps) != len(meta.Conns) {
		t.Fatalf("message snapshot: %v, %d QPs for %d connections", err, len(qps), len(meta.Conns))
	}
	if _, err := os.Stat(filepath.Join(rep.LuminaDir, lumina.LuminaRDMADir, lumina.LuminaReqStart)); !os.IsNotExist(err) {
		t.Fatalf("counter file without counters: %v", err)
	}
	t.Logf("%d packets over %s; dumpers %s wrote %v; %s", integ.Packets, strings.Join([]string{inj.NS, req.NS, resp.NS,
		dumpers[0].NS, dumpers[1].NS}, ", "), strings.Join(names, ", "), written, rep.Analysis)

	// The services stop cleanly on SIGTERM, as systemd stops them.
	for _, p := range append([]*scaleProc{injector}, dumps...) {
		if err := p.stop(10 * time.Second); err != nil {
			t.Errorf("%s: %v\n%s", p.name, err, lastLines(p.out.String(), 20))
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestDTAScaleOut spreads DTA over four machines, each a network
// namespace: one translator (`appliance dta translate`), two collectors
// (`appliance dta collect`, soft RNICs on AF_PACKET ports) and a
// reporter (the emulator, in this process on a port opened inside its
// namespace), their packet ports on one data bridge (a switch). The
// translator sets its RC connections up through each collector's
// exchange (TCP 40050) over the control network and routes keyed reports
// (Key-Write, Key-Increment, Postcarder) to collector KeyChecksum(key)
// mod 2, Append and Sketch-Merge to the collector that holds the list or
// sketch (list 1 on the first, list 2 and sketch 7 on the second). The
// test then asks both collectors over their HTTP control, as `appliance
// dta query` does, for every key and list the reporter sent: each answers
// where the hash or the holder put it and is absent from the other.
// connStats is what the translator says of its collector connections,
// for a failure message: a lost RDMA packet explains missing data.
func connStats(hc *http.Client, trAddr string) string {
	var st dtatranslator.Status
	if code, err := getJSON(hc, trAddr, "/v1/status", &st); code != http.StatusOK || err != nil {
		return fmt.Sprintf("status: %d %v", code, err)
	}
	var b strings.Builder
	for _, c := range st.Collectors {
		fmt.Fprintf(&b, "%s: lost PSNs %d, %+v; ", c.Name, c.LostPSNs, c.Conn)
	}
	return b.String()
}

func TestDTAScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("short: services across network namespaces")
	}
	n := newScaleNet(t, "dt")
	tr, rp := n.host("tr"), n.host("rep")
	colls := []*scaleHost{n.host("cola"), n.host("colb")}
	n.dataPort(tr, "data", "02:53:44:00:00:64")
	n.dataPort(rp, "data", "02:53:44:00:00:32")
	dir := t.TempDir()
	// The exchanges are on the control network: the collectors and the
	// translator share a key.
	keyFile := filepath.Join(dir, "dta.key")
	if err := os.WriteFile(keyFile, []byte("scale-out test key, 32 bytes..."), 0o600); err != nil {
		t.Fatal(err)
	}
	var collProcs []*scaleProc
	for i, c := range colls {
		n.dataPort(c, "data", fmt.Sprintf("02:53:44:00:00:0%d", i+1))
		held := fmt.Sprintf("append:\n  batch: 4\n  lists:\n    - {id: %d, entries: 16384}\n", i+1)
		if i == 1 {
			held += "sketches:\n  - {id: 7, kind: count-min, columns: 2048, rows: 2, reporters: 1, group: 16}\n"
		}
		spec := fmt.Sprintf(`name: %s
exchange: "%s:40050"
key-file: dta.key
listen: %s:9300
huge-pages: false
redundancy: 2
key-write: {slots: 1048576, data-width: 4}
key-increment: {slots: 262144}
postcards: {slots: 65536, hops: 5}
%s`, c.Name, c.IP, c.IP, held)
		file := filepath.Join(dir, c.Name+".yml")
		if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		collProcs = append(collProcs, n.start(c, "collector", "dta", "collect", "-f", file,
			"--nic", "afpacket:data"+afpOpts, "--gid", fmt.Sprintf("10.9.1.%d", i+1)))
	}
	for i, c := range colls {
		waitHealthy(t, collProcs[i], c.IP+":9300", 20*time.Second)
	}
	trFile := filepath.Join(dir, "translator.yml")
	// A flow's five postcards come spread over the reporter's stream; a
	// flush timeout shorter than that spread (the default 1 ms, under the
	// race detector) writes flows before their last hop, as incomplete.
	trSpec := fmt.Sprintf(`name: tr0
listen: %s:9310
port: "afpacket:data%s"
ip: 10.9.1.100
flush-timeout: 20ms
collectors:
  - {name: cola, exchange: "%s:40050", key-file: dta.key}
  - {name: colb, exchange: "%s:40050", key-file: dta.key}
`, tr.IP, afpOpts, colls[0].IP, colls[1].IP)
	if err := os.WriteFile(trFile, []byte(trSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	trProc := n.start(tr, "translator", "dta", "translate", "-f", trFile)
	// The translator is healthy once both collectors' connections are up.
	trAddr := tr.IP + ":9310"
	waitHealthy(t, trProc, trAddr, 20*time.Second)

	hc := &http.Client{Timeout: 5 * time.Second}
	var regions dtacollector.RegionsInfo
	if code, err := getJSON(hc, colls[1].IP+":9300", "/v1/regions", &regions); code != http.StatusOK || err != nil {
		t.Fatalf("colb regions: %d %v", code, err)
	}
	sk, ok := regions.Regions.Sketches[7]
	if !ok {
		t.Fatalf("colb offers no sketch 7: %+v", regions.Regions)
	}

	// The reporter, on its own host: 1% of first transmissions dropped on
	// purpose, so the translator NACKs and the reporter resends.
	pool, err := dpdk.NewPool(fmt.Sprintf("scaledta%d", os.Getpid()), 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	port, err := netns.OpenPort(rp.NS, "afpacket:data"+afpOpts, dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1, Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	cfg := dtatranslator.ReporterConfig{SrcMAC: header.MAC(port.Info().MAC), SrcIP: netip.MustParseAddr("10.9.1.50"),
		DstIP: netip.MustParseAddr("10.9.1.100"), Keys: 2000, Redundancy: 2, Lists: []uint32{1, 2}, Hops: 5,
		Sketch: &sk, SketchID: 7, Retransmittable: true, Loss: 0.01, Count: 8000, Rate: 40000, Seed: 11}
	cfg.Mix.KeyWrite, cfg.Mix.Append, cfg.Mix.KeyIncrement, cfg.Mix.Postcarder = 3, 2, 2, 1
	r, err := dtatranslator.NewReporter(cfg, port, pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Resolve(ctx); err != nil {
		t.Fatalf("resolving the translator's MAC: %v", err)
	}
	if err := r.Run(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	truth := r.Truth

	// The translator has nothing in flight and nothing more arrives.
	var st dtatranslator.Status
	var last dtatranslator.ServiceStats
	// (Fresh statuses: a published one may predate the last reports.)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, err := getJSON(hc, trAddr, "/v1/status?fresh=1", &st); code != http.StatusOK || err != nil {
			t.Fatalf("translator status: %d %v", code, err)
		}
		if st.Stats == last && st.Settled() && len(st.Collectors) == 2 &&
			st.Collectors[0].Conn.Packets > 0 && st.Collectors[1].Conn.Packets > 0 {
			break
		}
		last = st.Stats
		if time.Now().After(deadline) {
			t.Fatalf("translator did not settle: %+v", st)
		}
	}
	if st.Stats.Refused != 0 || st.Stats.NoCollector != 0 || st.Stats.CollectorDown != 0 || st.Stats.Malformed != 0 {
		t.Fatalf("translator: %+v", st.Stats)
	}

	owner := func(key uint32) int { return int(dtamem.KeyChecksum(key) % 2) }
	addr := func(i int) string { return colls[i].IP + ":9300" }
	// Lists: each on its holder, every entry in the order sent, once the
	// holder's pollers have read them; the other collector lacks it.
	for i := range colls {
		id := uint32(i + 1)
		want := truth.Append[id]
		var ls dtacollector.ListStatus
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			path := fmt.Sprintf("/v1/lists/%d?recent=%d", id, max(len(want), 1))
			if code, err := getJSON(hc, addr(i), path, &ls); code != http.StatusOK || err != nil {
				t.Fatalf("%s list %d: %d %v", colls[i].Name, id, code, err)
			}
			if ls.Read+ls.Lost >= uint64(len(want)) || time.Now().After(deadline) {
				break
			}
		}
		got := make([]uint32, 0, len(ls.Recent))
		for _, e := range ls.Recent {
			got = append(got, e.Data)
		}
		if len(want) == 0 || ls.Read != uint64(len(want)) || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s list %d: read %d, lost %d, %d entries back, want the %d sent in order; the translator's connections: %s",
				colls[i].Name, id, ls.Read, ls.Lost, len(got), len(want), connStats(hc, trAddr))
		}
		if code, _ := getJSON(hc, addr(1-i), fmt.Sprintf("/v1/lists/%d", id), nil); code != http.StatusNotFound {
			t.Fatalf("%s answers list %d: %d", colls[1-i].Name, id, code)
		}
	}
	// Key-Write: the reported value at the key's collector (Key-Write
	// is lossy by design: a key whose N slots were all overwritten by
	// later keys is absent, rarely at this load), never at the other.
	var perColl [2]int
	found := 0
	for k, v := range truth.KeyWrite {
		o := owner(k)
		perColl[o]++
		var kw dtacollector.KeyWriteResult
		code, err := getJSON(hc, addr(o), fmt.Sprintf("/v1/keywrite/%d", k), &kw)
		switch {
		case code == http.StatusOK && err == nil && kw.Value == v:
			found++
		case code != http.StatusNotFound:
			t.Fatalf("key-write %d at %s: %d %v %+v, want %d", k, colls[o].Name, code, err, kw, v)
		}
		if code, _ := getJSON(hc, addr(1-o), fmt.Sprintf("/v1/keywrite/%d", k), nil); code != http.StatusNotFound {
			t.Fatalf("key-write %d (collector %s by hash) answers at %s: %d", k, colls[o].Name, colls[1-o].Name, code)
		}
	}
	if perColl[0] == 0 || perColl[1] == 0 || found < len(truth.KeyWrite)*99/100 {
		t.Fatalf("key-write: %d keys per collector, %d of %d found; %s", perColl, found, len(truth.KeyWrite), connStats(hc, trAddr))
	}
	// Key-Increment: at the key's collector at least the reported sum
	// (count-min never undercounts); at the other nothing, but where
	// count-min collisions with that collector's own keys add up.
	exact, strayOther := 0, 0
	for k, v := range truth.KeyIncrement {
		o := owner(k)
		var ki, other dtacollector.KeyIncrementResult
		if code, err := getJSON(hc, addr(o), fmt.Sprintf("/v1/keyincrement/%d", k), &ki); code != http.StatusOK || err != nil || ki.Count < v {
			t.Fatalf("key-increment %d at %s: %d %v %+v, want at least %d; %s", k, colls[o].Name, code, err, ki, v, connStats(hc, trAddr))
		}
		if ki.Count == v {
			exact++
		}
		if code, err := getJSON(hc, addr(1-o), fmt.Sprintf("/v1/keyincrement/%d", k), &other); code != http.StatusOK || err != nil {
			t.Fatalf("key-increment %d at %s: %d %v", k, colls[1-o].Name, code, err)
		}
		if other.Count != 0 {
			strayOther++
		}
	}
	if n := len(truth.KeyIncrement); n == 0 || exact < n*99/100 || strayOther > n/100 {
		t.Fatalf("key-increment: %d keys, %d exact at their collector, %d counted at the other", n, exact, strayOther)
	}
	// Postcards: the flow's path at its collector, never at the other.
	paths, incomplete := 0, 0
	for k, want := range truth.Postcards {
		o := owner(k)
		// The collector checks every hop the record holds against the
		// path (409 when one differs); an incomplete record says which
		// hops are missing and is not a path found.
		var pc dtacollector.PostcardResult
		hops := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(want)), ","), "[]")
		code, err := getJSON(hc, addr(o), fmt.Sprintf("/v1/postcards/%d?expect=%s", k, hops), &pc)
		switch {
		case code == http.StatusOK && err == nil && pc.Complete && fmt.Sprint(pc.Hops) == fmt.Sprint(want):
			paths++
		case code == http.StatusOK && err == nil && !pc.Complete && len(pc.Missing) == len(want)-pc.Reported && len(pc.Missing) > 0:
			incomplete++
		case code != http.StatusNotFound:
			t.Fatalf("postcard %d at %s: %d %v %+v, want %v", k, colls[o].Name, code, err, pc, want)
		}
		if code, _ := getJSON(hc, addr(1-o), fmt.Sprintf("/v1/postcards/%d", k), nil); code != http.StatusNotFound {
			t.Fatalf("postcard %d (collector %s by hash) answers at %s: %d", k, colls[o].Name, colls[1-o].Name, code)
		}
	}
	t.Logf("postcards: %d of %d paths complete, %d incomplete", paths, len(truth.Postcards), incomplete)
	if n := len(truth.Postcards); n == 0 || paths < n*9/10 {
		t.Fatalf("postcards: %d of %d paths complete; %s", paths, n, connStats(hc, trAddr))
	}
	// Sketch 7: merged at its holder, an upper bound of every Key-Write
	// key's reports; the other collector serves no sketch.
	for k, vs := range truth.KeyWriteAll {
		var sc dtacollector.SketchCountResult
		if code, err := getJSON(hc, addr(1), fmt.Sprintf("/v1/sketches/7/count/%d", k), &sc); code != http.StatusOK || err != nil || sc.Count < uint32(len(vs)) {
			t.Fatalf("sketch 7 count %d at colb: %d %v %+v, want at least %d", k, code, err, sc, len(vs))
		}
	}
	if code, _ := getJSON(hc, addr(0), "/v1/sketches/7/count/1", nil); code != http.StatusNotFound {
		t.Fatalf("cola answers sketch 7: %d", code)
	}
	// `appliance dta query` from here, as an operator asks: one
	// translator connected to each collector.
	for i := range colls {
		code, out, errOut := runCLI(t, "dta", "query", "--collector", addr(i), "--json", "stats")
		var cs dtacollector.Stats
		if code != 0 || json.Unmarshal([]byte(out), &cs) != nil || cs.Connections != 1 || cs.Name != colls[i].Name {
			t.Fatalf("dta query stats at %s: %d %s %s", colls[i].Name, code, out, errOut)
		}
	}
	t.Logf("%d reports (%d resent on %d NACKs) over %s to %s: key-write keys %d/%d by hash (%d of %d found), "+
		"%d key-increment keys (%d exact), %d of %d paths, lists %d/%d entries", r.Stats.Sent, r.Stats.Resent, r.Stats.NACKs,
		tr.NS, strings.Join([]string{colls[0].NS, colls[1].NS}, ", "), perColl[0], perColl[1], found, len(truth.KeyWrite),
		len(truth.KeyIncrement), exact, paths, len(truth.Postcards), len(truth.Append[1]), len(truth.Append[2]))
	for _, p := range append([]*scaleProc{trProc}, collProcs...) {
		if err := p.stop(10 * time.Second); err != nil {
			t.Errorf("%s: %v\n%s", p.name, err, lastLines(p.out.String(), 20))
		}
	}
}

func yamlFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, v)
}
