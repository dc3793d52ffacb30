package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/dtatofino"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

// TestDtaSwitchCPU runs the command on one end of a ring link that plays
// the switch CPU's port: the reports the "pipeline" queues to it come
// back, a frame that is not a report is counted, and the counters print as
// JSON when the command is interrupted.
func TestDtaSwitchCPU(t *testing.T) {
	l := ring.Named("swcpu", ring.Config{})
	defer ring.Forget("swcpu")
	pool, err := dpdk.NewPool("swcpu-test", 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	send := func(b []byte) {
		p := pool.Get()
		p.CopyFrom(b)
		if l.B().TxBurst(0, []*dpdk.Packet{p}) != 1 {
			t.Fatal("ring full")
		}
	}
	for k := range uint32(3) {
		var payload [32]byte
		n, _ := dtawire.Format{}.Encode(payload[:], &dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 1, Key: k,
			Data: []byte{1, 2, 3, 4}})
		frame := make([]byte, 128)
		m, err := dtatranslator.WriteUDP4(frame, header.MAC{2, 0, 0, 0, 0, 1}, header.MAC{2, 0, 0, 0, 0, 2},
			[4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, dtawire.GeneratorPort, dtawire.ReportPort, 46, payload[:n])
		if err != nil {
			t.Fatal(err)
		}
		send(frame[:m])
	}
	send([]byte("not a report, not even a frame"))
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"dta", "switch-cpu", "--port", "ring:swcpu.a", "--rate", "1000", "--json"}, &out, &errb)
	}()
	bufs := make([]*dpdk.Packet, 8)
	back := 0
	for deadline := time.Now().Add(10 * time.Second); back < 3 && time.Now().Before(deadline); {
		n := l.B().RxBurst(0, bufs)
		dpdk.FreeBulk(bufs[:n])
		back += n
		time.Sleep(time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 || back != 3 {
		t.Fatalf("exit %d, %d reports back: %s", code, back, errb.String())
	}
	var st dtatofino.CPUAgentStats
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if st.Received != 3 || st.Resent != 3 || st.Malformed != 1 || st.Overflow != 0 {
		t.Fatalf("counters %+v", st)
	}
}

func TestDtaSwitchCPUErrors(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--rate 10", "want --port"},
		{"--port ring:e.a", "--rate: at least 1"},
		{"--port ring:e.a --rate 10 --burst 0", "--burst 0"},
		{"--port ring:e.a --rate 10 --depth 0", "--depth 0"},
		{"--port ring:e.a --rate 10 --data-width 6", "--data-width"},
	} {
		code, _, errOut := runCLI(t, append([]string{"dta", "switch-cpu"}, strings.Fields(c.args)...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, %q", c.args, code, errOut)
		}
	}
}
