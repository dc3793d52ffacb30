package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/appliance/lumina"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/service"
)

// inProcess runs "remote" commands as this process's CLI, as if SSH had
// started them on the host.
type inProcess struct{}

func (inProcess) Run(ctx context.Context, h lumina.Access, argv []string) ([]byte, error) {
	if argv[0] != "appliance" {
		return nil, fmt.Errorf("%s: not found on %s", argv[0], h.ControlIP)
	}
	var o, e bytes.Buffer
	if code := run(ctx, argv[1:], &o, &e); code != 0 {
		return o.Bytes(), fmt.Errorf("%s on %s exited %d: %s", strings.Join(argv[:min(4, len(argv))], " "), h.ControlIP, code, e.String())
	}
	return o.Bytes(), nil
}

// TestLuminaRunRemote runs a Lumina test without --lab: the injector and
// the two dumpers are services on loopback addresses (their ports are
// in-process rings), the traffic generator's sides are started through the
// executor, and the orchestrator collects, fetches and merges as it would
// from real machines.
func TestLuminaRunRemote(t *testing.T) {
	id := fmt.Sprintf("rm%d", time.Now().UnixNano()%1e6)
	for _, l := range []string{"r", "s", "m1", "m2"} {
		ring.Named(id+l, ring.Config{})
	}
	mac := func(l string) string { return header.MAC(ring.Named(id+l, ring.Config{}).A().Info().MAC).String() }
	injAddr, dumpAddr, tgAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	_, injPort, _ := net.SplitHostPort(injAddr)
	_, dumpPort, _ := net.SplitHostPort(dumpAddr)
	_, tgPort, _ := net.SplitHostPort(tgAddr)
	dir := t.TempDir()
	spec := fmt.Sprintf(`listen: 127.0.0.1:%s
ports:
  - {name: requester, role: traffic, port: "ring:%[2]sr.b", addrs: [10.0.0.254]}
  - {name: responder, role: traffic, port: "ring:%[2]ss.b", addrs: [10.0.1.254]}
  - {name: requester-mirror, role: mirror, port: "ring:%[2]sm1.a"}
  - {name: responder-mirror, role: mirror, port: "ring:%[2]sm2.a"}
routes:
  - {prefix: 10.0.0.1, port: requester, mac: "%[3]s"}
  - {prefix: 10.0.1.1, port: responder, mac: "%[4]s"}
`, injPort, id, mac("r"), mac("s"))
	injFile := filepath.Join(dir, "injector.yml")
	if err := os.WriteFile(injFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svcDone := make(chan string, 3)
	start := func(args ...string) {
		go func() {
			var o, e bytes.Buffer
			code := run(ctx, args, &o, &e)
			svcDone <- fmt.Sprintf("%s: %d %s", args[0], code, e.String())
		}()
	}
	start("inject", "run", "-f", injFile)
	start("dump", "--port", "ring:"+id+"m1.b", "--listen", "127.0.0.2:"+dumpPort, "--name", "requester-mirror", "--dir", filepath.Join(dir, "d1"))
	start("dump", "--port", "ring:"+id+"m2.b", "--listen", "127.0.0.3:"+dumpPort, "--name", "responder-mirror", "--dir", filepath.Join(dir, "d2"))
	for _, a := range []string{injAddr, "127.0.0.2:" + dumpPort, "127.0.0.3:" + dumpPort} {
		c := service.NewClient(a)
		for deadline := time.Now().Add(10 * time.Second); c.Do(ctx, "GET", "/healthz", nil, nil) != nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not come up", a)
			}
		}
	}
	// The test: the ready-made 20 KB sweep cut to four QPs, pointed at
	// the loopback machines.
	tt, err := lumina.LoadTest(filepath.Join("..", "lumina", "testdata", "tests", "fast-retrans-20k.yml"))
	if err != nil {
		t.Fatal(err)
	}
	s := tt.Spec
	s.ResultPath = filepath.Join(dir, "results")
	s.Switch.ControlIP, s.Switch.ListenPort = "127.0.0.1", atoi(t, injPort)
	s.RequesterMirror.ControlIP, s.ResponderMirror.ControlIP = "127.0.0.2", "127.0.0.3"
	s.Requester.ControlIP, s.Responder.ControlIP = "127.0.0.4", "127.0.0.5"
	s.Requester.NIC.IPList, s.Responder.NIC.IPList = []string{"10.0.0.1"}, []string{"10.0.1.1"}
	s.Traffic.NumQPs, s.Traffic.ListenPort = "4", atoi(t, tgPort)
	s.Traffic.DataPktEvents = s.Traffic.DataPktEvents[:4]
	data, err := lumina.MarshalTest(&s)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "test.yml")
	if err := os.WriteFile(testFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	old := remoteExec
	remoteExec = inProcess{}
	defer func() { remoteExec = old }()
	// The services run in this process: no machine to set up.
	code, out, errOut := runCLI(t, "lumina", "run", "-f", testFile, "--dumper-port", dumpPort, "--setup=false",
		"--requester-device", "--nic ring:"+id+"r.a --gid 10.0.0.1", "--responder-device", "--nic ring:"+id+"s.a --gid 10.0.1.1")
	if code != 0 || !strings.Contains(out, "repeat 0: valid") || !strings.Contains(out, "traffic ok") {
		t.Fatalf("lumina run: %d\n%s\n%s", code, out, errOut)
	}
	runs, _ := filepath.Glob(filepath.Join(s.ResultPath, "*", "0"))
	if len(runs) != 1 {
		t.Fatalf("result dirs %v", runs)
	}
	for _, f := range []string{"trace.pcap", "meta.json", "trafficgen.json", "integrity.json", "dumps/requester-mirror-dump-q0.pcap"} {
		if _, err := os.Stat(filepath.Join(runs[0], f)); err != nil {
			t.Error(err)
		}
	}
	// An unreachable dumper is named with what to check.
	code, _, errOut = runCLI(t, "lumina", "run", "-f", testFile, "--dumper-port", "1", "--setup=false")
	if code != 1 || !strings.Contains(errOut, "requester-mirror: starting the capture") {
		t.Fatalf("unreachable dumper: %d %s", code, errOut)
	}
	cancel()
	for range 3 {
		if r := <-svcDone; !strings.Contains(r, ": 0 ") {
			t.Errorf("service: %s", r)
		}
	}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
