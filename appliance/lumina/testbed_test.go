package lumina

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/dpdk/netns"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// writeIntents drop, mark and corrupt one packet of three different QPs;
// each intent names one packet (psn from the connection's first packet),
// so QP 1's second message is marked by an intent of its own.
var writeIntents = []intent.Intent{
	{QP: 0, PSN: 2, Iter: 1, Type: mirror.EventDrop},
	{QP: 1, PSN: 1, Iter: 1, Type: mirror.EventECN},
	{QP: 1, PSN: 5, Iter: 1, Type: mirror.EventECN},
	{QP: 2, PSN: 3, Iter: 1, Type: mirror.EventBitError},
}

// writeParams: three QPs of two 4 KiB WRITEs at MTU 1024, one at a time
// (Lumina's tx-depth 1 for non-ECN events), 67 ms ACK timeout.
var writeParams = trafficgen.Params{Verb: intent.VerbWrite, NumQPs: 3, MsgsPerQP: 2, MessageSize: 4096, MTU: 1024,
	TxDepth: 1, Timeout: 14, RetryCnt: 7, Seed: 7}

// endToEnd is the acceptance run of the Lumina data path: two soft RNICs
// through the injector, two dumpers; the merged trace passes integrity,
// exactly the targeted packets carry their event, the dropped and the
// corrupted packets are sent again, the marked one draws a CNP and the
// corrupted one fails the receiver's ICRC check.
func endToEnd(t *testing.T, useNetns bool) {
	tb, err := NewTestbed(TestbedConfig{Name: fmt.Sprintf("e2e%d", os.Getpid()), Netns: useNetns, Dir: t.TempDir(),
		Dumpers: []DumperSpec{{Queues: 2}, {Queues: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	run, err := tb.RunEvents(context.Background(), writeParams, writeIntents, tb.Path("merged.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if !run.Traffic.OK() {
		t.Fatalf("traffic: %+v", run.Traffic.QPs)
	}
	if run.IntegrityErr != nil {
		t.Fatalf("integrity: %v", run.IntegrityErr)
	}
	ev := run.Events
	if len(ev.Problems) > 0 {
		t.Fatalf("events: %v", ev.Problems)
	}
	// One mark per ECN intent (both messages of QP 1), the drop and the
	// corruption on the first message.
	if ev.Marked["ecn"] != 2 || ev.Marked["drop"] != 1 || ev.Marked["bit-error"] != 1 || ev.Retransmitted != 2 ||
		ev.CNPs == 0 || ev.ICRCDrops != 1 {
		t.Fatalf("events %+v", ev)
	}
	if ev.Packets != run.Capture.Injector.Mirrored || ev.Packets != run.Capture.Injector.RxRoCE || !run.Pass() {
		t.Fatalf("trace %d packets, injector mirrored %d, received %d", ev.Packets, run.Capture.Injector.Mirrored, run.Capture.Injector.RxRoCE)
	}
	var written uint64
	for _, r := range run.Capture.Results {
		written += r.Written
		if r.Lost() != 0 {
			t.Fatalf("dumper %s lost %d", r.Name, r.Lost())
		}
	}
	if written != ev.Packets {
		t.Fatalf("dumpers wrote %d, merged %d", written, ev.Packets)
	}
	t.Logf("%d packets, %d CNPs, %.2f Gbit/s goodput", ev.Packets, ev.CNPs, run.Traffic.Goodput/1e9)
}

func TestEndToEnd(t *testing.T) { endToEnd(t, false) }

// TestEndToEndNetns is the same run across network namespaces: every link
// a veth pair, every port AF_PACKET.
func TestEndToEndNetns(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	endToEnd(t, true)
}

// TestDeadDumper: a dumper whose file is gone makes the test invalid, and
// the integrity error names it and the copies it should have had.
func TestDeadDumper(t *testing.T) {
	tb, err := NewTestbed(TestbedConfig{Name: fmt.Sprintf("dead%d", os.Getpid()), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	p := writeParams
	p.NumQPs = 1
	run, err := tb.RunEvents(context.Background(), p, nil, tb.Path("merged.pcap"))
	if err != nil || !run.Pass() {
		t.Fatalf("clean run: %v %+v", err, run.Events)
	}
	for _, f := range run.Capture.Results[1].Files {
		os.Remove(f.Path)
	}
	_, err = tb.Merge(context.Background(), run.Capture, tb.Path("merged2.pcap"))
	if !errors.Is(err, trace.ErrInvalidTest) || !strings.Contains(err.Error(), "dumper1") {
		t.Fatalf("merge without dumper1: %v", err)
	}
}
