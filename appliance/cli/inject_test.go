package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/dumper"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/translator/inject"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestInjectAndDump runs `appliance inject run` and `appliance dump` in
// this process on ring ports: a RoCE packet sent from the requester's
// side comes out of the responder's side, its ECN-marked copy (an intent
// loaded over HTTP) lands in the dumper, which writes it restored when
// the command stops.
func TestInjectAndDump(t *testing.T) {
	id := fmt.Sprintf("cli%d", time.Now().UnixNano()%1e6)
	dir := t.TempDir()
	injAddr, dumpAddr := freeAddr(t), freeAddr(t)
	spec := fmt.Sprintf(`listen: %s
ports:
  - {name: req, role: traffic, port: "ring:%[2]sr.b", addrs: [10.0.0.254]}
  - {name: resp, role: traffic, port: "ring:%[2]ss.b", addrs: [10.0.1.254]}
  - {name: d0, role: mirror, port: "ring:%[2]sm.a"}
routes:
  - {prefix: 10.0.0.1, port: req, mac: "02:00:00:00:00:01"}
  - {prefix: 10.0.1.1, port: resp, mac: "02:00:00:00:00:02"}
`, injAddr, id)
	file := filepath.Join(dir, "inj.yml")
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code     int
		out, err string
	}
	injDone, dumpDone := make(chan result, 1), make(chan result, 1)
	go func() {
		var o, e bytes.Buffer
		c := run(ctx, []string{"inject", "run", "-f", file}, &o, &e)
		injDone <- result{c, o.String(), e.String()}
	}()
	go func() {
		var o, e bytes.Buffer
		c := run(ctx, []string{"dump", "--port", "ring:" + id + "m.b", "--listen", dumpAddr, "--start", "--dir", dir, "--name", "rm"}, &o, &e)
		dumpDone <- result{c, o.String(), e.String()}
	}()
	inj, dmp := service.NewClient(injAddr), service.NewClient(dumpAddr)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var st dumper.Status
		if inj.Do(ctx, "GET", "/v1/stats", nil, nil) == nil && dmp.Do(ctx, "GET", "/v1/status", nil, &st) == nil && st.State == "capturing" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("services did not come up")
		}
	}
	req := inject.LoadRequest{Intents: []intent.Intent{{QP: 0, PSN: 0, Iter: 1, Type: mirror.EventECN}},
		Conns: []intent.Conn{{RequesterIP: netip.MustParseAddr("10.0.0.1"), RequesterQPN: 0x11, RequesterIPSN: 100,
			ResponderIP: netip.MustParseAddr("10.0.1.1"), ResponderQPN: 0x22, ResponderIPSN: 200}},
		Geometry: intent.Geometry{Verb: intent.VerbWrite, MessageSize: 1024, MTU: 1024, NumMessages: 1}, Reset: true}
	if err := inj.Do(ctx, "POST", "/v1/load", req, nil); err != nil {
		t.Fatal(err)
	}
	host := ring.Named(id+"r", ring.Config{}).A()
	peer := ring.Named(id+"s", ring.Config{}).A()
	pool, err := dpdk.NewPool(id, 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b := roce.Builder{SrcGID: roce.GIDFromAddr(netip.MustParseAddr("10.0.0.1")), DstGID: roce.GIDFromAddr(netip.MustParseAddr("10.0.1.1")),
		Opcode: roce.RCWriteOnly, DestQP: 0x22, PSN: 100, HopLimit: 64, DMALen: 1024,
		SrcMAC: header.MAC{2, 0, 0, 0, 0, 1}, DstMAC: header.MAC(ring.Named(id+"r", ring.Config{}).B().Info().MAC)}
	p := pool.Get()
	n, err := b.BuildInPlace(p.Buffer(), 1024)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.SetLen(n)
	if host.TxBurst(0, []*dpdk.Packet{p}) != 1 {
		t.Fatal("send")
	}
	var got [1]*dpdk.Packet
	for deadline := time.Now().Add(5 * time.Second); peer.RxBurst(0, got[:]) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the packet was not forwarded")
		}
	}
	var np header.Parsed
	if err := header.Decode(got[0].Data(), &np); err != nil || header.IPv4(got[0].Data()[np.L3Off:]).ECN() != header.ECNCE {
		t.Fatalf("forwarded packet: %v, ECN not CE", err)
	}
	got[0].Free()
	var st dumper.Status
	for deadline := time.Now().Add(5 * time.Second); st.Captured == 0; time.Sleep(time.Millisecond) {
		if err := dmp.Do(ctx, "GET", "/v1/status", nil, &st); err != nil || time.Now().After(deadline) {
			t.Fatalf("dumper status %+v %v", st, err)
		}
	}
	cancel()
	ir, dr := <-injDone, <-dumpDone
	if ir.code != 0 || !strings.Contains(ir.out, "1 RoCE packets received, 1 copies mirrored") {
		t.Fatalf("inject: %d %q %q", ir.code, ir.out, ir.err)
	}
	want := filepath.Join(dir, "dump-q0.pcap") + ": 1 packets"
	if dr.code != 0 || !strings.Contains(dr.out, want) {
		t.Fatalf("dump: %d %q %q", dr.code, dr.out, dr.err)
	}
}

func TestInjectCompileAndBfrt(t *testing.T) {
	load := filepath.Join("..", "..", "p4", "luminatofino", "testdata", "listing2_load.json")
	code, out, errOut := runCLI(t, "inject", "compile", "--load", load)
	if code != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(out, "qpn 0xea psn 1004 iter 1: ecn") {
		t.Fatalf("compile: %d %q %q", code, out, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	data, _ := os.ReadFile(load)
	_ = os.WriteFile(bad, bytes.Replace(data, []byte(`"qpn": 2, "psn": 5, "iter": 1`), []byte(`"qpn": 7, "psn": 5, "iter": 1`), 1), 0o644)
	if code, _, errOut := runCLI(t, "inject", "compile", "--load", bad); code != 1 || !strings.Contains(errOut, "qpn 7") {
		t.Fatalf("bad intent: %d %q", code, errOut)
	}
	spec := filepath.Join("..", "..", "p4", "luminatofino", "testdata", "listing2_injector.yml")
	code, out, errOut = runCLI(t, "inject", "bfrt", "-f", spec, "--load", load)
	want, _ := os.ReadFile(filepath.Join("..", "..", "p4", "luminatofino", "testdata", "listing2.py"))
	if code != 0 || out != string(want) {
		t.Fatalf("bfrt: %d, %d bytes, want %d; %q", code, len(out), len(want), errOut)
	}
	badSpec := filepath.Join(t.TempDir(), "bad.yml")
	_ = os.WriteFile(badSpec, []byte("ports:\n  - {name: a, role: traffic, port: x, weigth: 2}\n"), 0o644)
	if code, _, errOut := runCLI(t, "inject", "run", "-f", badSpec); code != 1 || !strings.Contains(errOut, "bad.yml:2: ports[0].weigth: unknown key") {
		t.Fatalf("bad spec: %d %q", code, errOut)
	}
}
