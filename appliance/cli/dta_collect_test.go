package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestDtaCollectAndQuery runs `appliance dta collect` on a software RNIC
// on a ring port, writes into it as a translator from the other end of
// the link, and reads everything back with `appliance dta query`.
func TestDtaCollectAndQuery(t *testing.T) {
	id := fmt.Sprintf("dtacli%d", time.Now().UnixNano()%1e6)
	dir := t.TempDir()
	httpAddr, exAddr := freeAddr(t), freeAddr(t)
	file := filepath.Join(dir, "collector.yml")
	yml := fmt.Sprintf(`name: clitest
listen: %s
exchange: %s
key-file: dta.key
key-write: {slots: 65536}
key-increment: {slots: 1024}
append:
  lists: [{id: 1, entries: 64, pollers: 2}]
`, httpAddr, exAddr)
	if err := os.WriteFile(file, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	// The key, relative to the collector's file: the translator must
	// prove it holds it.
	key := []byte("0123456789abcdef0123456789abcdef")
	if err := os.WriteFile(filepath.Join(dir, "dta.key"), append(key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		var o, e bytes.Buffer
		c := run(ctx, []string{"--log-level", "warn", "dta", "collect", "-f", file, "--nic", "ring:" + id + ".b", "--gid", "10.9.0.1"}, &o, &e)
		done <- result{c, o.String(), e.String()}
	}()
	cl := service.NewClient(httpAddr)
	for deadline := time.Now().Add(10 * time.Second); cl.Do(ctx, "GET", "/v1/stats", nil, nil) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			select {
			case r := <-done:
				t.Fatalf("collect exited: %d %q %q", r.code, r.out, r.err)
			default:
			}
			t.Fatal("the collector did not come up")
		}
	}

	// The translator's side of the link.
	port := ring.Named(id, ring.Config{}).A()
	pool, err := dpdk.NewPool(id, 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	mac := header.MAC(port.Info().MAC)
	transIP := netip.MustParseAddr("10.9.0.100")
	tcp, offer, err := dtamem.Dial(ctx, exAddr, dtamem.Hello{Name: "t0", IP: transIP, MAC: mac.String(), QPN: 0x42, PSN: 77}, key)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	peer, err := offer.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	conn := dtatranslator.NewConn(dtamem.Endpoint{MAC: mac, GID: roce.GIDFromAddr(transIP), QPN: 0x42}, peer, 77)
	tr, err := dtatranslator.NewTranslator(conn, offer.Regions)
	if err != nil {
		t.Fatal(err)
	}
	emit := func(frame []byte) error {
		p := pool.Get()
		if p == nil {
			return fmt.Errorf("pool empty")
		}
		p.CopyFrom(frame)
		for deadline := time.Now().Add(5 * time.Second); port.TxBurst(0, []*dpdk.Packet{p}) == 0; time.Sleep(10 * time.Microsecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("ring full")
			}
		}
		return nil
	}
	data := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	for k := uint32(1); k <= 20; k++ {
		for _, r := range []dtawire.Report{
			{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: data(k * 100)},
			{Opcode: dtawire.OpKeyIncrement, Redundancy: 2, Key: k % 3, Counter: uint64(k)},
			{Opcode: dtawire.OpAppend, ListID: 1, Data: data(k + 1000)},
		} {
			if err := tr.Translate(&r, emit); err != nil {
				t.Fatal(err)
			}
		}
		settleConn(t, port, conn)
	}
	if err := tr.Flush(0, emit); err != nil {
		t.Fatal(err)
	}
	settleConn(t, port, conn)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var ls dtacollector.ListStatus
		if err := cl.Do(ctx, "GET", "/v1/lists/1", nil, &ls); err == nil && ls.Read == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pollers did not read list 1")
		}
	}

	q := func(args ...string) (int, string, string) {
		return runCLI(t, append([]string{"dta", "query", "--collector", httpAddr}, args...)...)
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"keywrite", "7"}, 0, "key 7: data 000002bc (700); 2 of 2 slots hold the key, 2 agree"},
		{[]string{"--consensus", "2", "keywrite", "0x7"}, 0, "(700)"},
		{[]string{"keyincrement", "2"}, 0, fmt.Sprintf("key 2: count %d", 2+5+8+11+14+17+20)},
		{[]string{"--recent", "2", "list", "1"}, 0, "list 1: 20 entries read (ring of 64, batch 4)"},
		{[]string{"--recent", "2", "list", "1"}, 0, "19: 1020"},
		{[]string{"stats"}, 0, "1 translators connected"},
		{[]string{"connections"}, 0, "t0"},
		{[]string{"regions"}, 0, "key-write: 65536 slots"},
		{[]string{"keywrite", "99999"}, 1, "key-write key 99999: not found"},
		{[]string{"list", "9"}, 1, "list 9: no such Append list"},
		{[]string{"sketch", "7", "count", "1"}, 1, "sketch-merge: not served"},
		{[]string{"postcard", "1"}, 1, "postcarder: not served"},
		{[]string{"keywrite", "k"}, 2, `key "k"`},
		{[]string{"frob"}, 2, `unknown query "frob"`},
	} {
		code, out, errOut := q(tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.says) {
			t.Errorf("query %v: %d %q %q, want %d saying %q", tc.args, code, out, errOut, tc.code, tc.says)
		}
	}
	code, out, _ := q("--json", "keywrite", "3")
	var kw dtacollector.KeyWriteResult
	if code != 0 || json.Unmarshal([]byte(out), &kw) != nil || kw.Value != 300 {
		t.Fatalf("--json keywrite: %d %q", code, out)
	}

	cancel()
	r := <-done
	if r.code != 0 || !strings.Contains(r.out, "collector clitest: 1 translator connections, 0 push notifications, list 1: 20 entries") {
		t.Fatalf("collect: %d %q %q", r.code, r.out, r.err)
	}
}

// settleConn feeds the collector's ACKs to conn until it has
// acknowledged everything.
func settleConn(t *testing.T, port dpdk.Port, conn *dtatranslator.Conn) {
	t.Helper()
	var burst [32]*dpdk.Packet
	var p roce.Packet
	for deadline := time.Now().Add(10 * time.Second); conn.Outstanding() > 0; time.Sleep(100 * time.Microsecond) {
		for n := port.RxBurst(0, burst[:]); n > 0; n = port.RxBurst(0, burst[:]) {
			for _, pkt := range burst[:n] {
				if roce.Parse(pkt.Data(), &p) == nil && p.AETH(pkt.Data()) != nil {
					_, _ = conn.Input(&p, pkt.Data())
				}
			}
			dpdk.FreeBulk(burst[:n])
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d packets unacknowledged: %+v", conn.Outstanding(), conn.Stats)
		}
	}
	if conn.Stats.Resyncs != 0 {
		t.Fatalf("the collector NAKed: %+v", conn.Stats)
	}
}

// TestDtaCollectErrors: a bad file is refused with its line, and the
// device flags are required.
func TestDtaCollectErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yml")
	if err := os.WriteFile(file, []byte("key-write:\n  slots: 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "dta", "collect", "-f", file, "--nic", "ring:x.b", "--gid", "10.0.0.1"); code != 1 ||
		!strings.Contains(errOut, file+":2: key-write.slots: 1000: a power of two") {
		t.Fatalf("bad file: %d %q", code, errOut)
	}
	good := filepath.Join("..", "..", "collector", "dtacollector", "testdata", "collector.yml")
	if code, _, errOut := runCLI(t, "dta", "collect", "-f", good); code != 2 || !strings.Contains(errOut, "need -d DEVICE") {
		t.Fatalf("no device: %d %q", code, errOut)
	}
	if code, out, _ := runCLI(t, "dta", "collect", "--help"); code != 0 || !strings.Contains(out, "Usage: appliance dta collect") {
		t.Fatalf("collect --help: %d %q", code, out)
	}
	if code, out, _ := runCLI(t, "dta", "query", "--help"); code != 0 || !strings.Contains(out, "keywrite KEY") {
		t.Fatalf("query --help: %d %q", code, out)
	}
}
