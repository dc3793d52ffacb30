package hawkeyetofino

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
)

// A window of the 4 epochs up to epoch 4097 (ring slots 1, 2, 3, 0; ids
// 0, 0, 0, 1... as ts[29:22] has them).
var testWindow = NewWindow(4097<<EpochShift+5, Epochs)

// TestReadScriptNames: every register the read script names is declared
// in telemetry.p4 and in what bf-p4c compiled it into.
func TestReadScriptNames(t *testing.T) {
	s, err := leaf(t).ReadScript(testWindow)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	p4test.CheckScript(t, p4test.Parse(t, prog), DefaultName, "read.py", s, used)
	for _, r := range readRegs {
		if !used[bfrtEgress+"."+r] {
			t.Errorf("register %s not read", r)
		}
	}
	p4test.CheckScript(t, p4test.Compiled(t, prog), DefaultName, "read.py", s, map[string]bool{})
}

const bfrtEgress = "Egress"

// readAnswers are a switch's registers for the mock bfrt_python: in slot
// 1 (epoch 4097, id 0) spine0 (index 2) counted 10 packets, 3 paused, a
// queue of 3000 bytes, and two PFC frames; in slot 0 (epoch 4096, id 0) h0
// counted one; slot 3 holds epoch 4095 (id 255) for every port; h1's slot
// 2 holds an older epoch (id 200), which ParseRegisters keeps and the
// report drops. One meter h0 -> spine0 of slot 1 and one flow of slot 1 in
// pipe 0 (slot 77), both of the epoch read; a meter of another epoch is
// filtered by the script. spine0's pause timer runs 1000 ns past the read.
const readAnswers = `
def register_values(r, i):
    k, p = i // 64, i % 64
    if r == 'port_epoch':
        if k == 3:
            return [255, 255]
        if k == 2 and p == 1:
            return [200, 200]
        return [0, 0]
    if k == 1 and p == 2 and r in ('port_pkts', 'port_paused', 'port_qdepth', 'port_pfc_frames'):
        return [{'port_pkts': 10, 'port_paused': 3, 'port_qdepth': 3000, 'port_pfc_frames': 2}[r], 0]
    if k == 0 and p == 0 and r == 'port_pkts':
        return [1, 0]
    if r == 'pause_until':
        return [((4097 << 20) + 5 + 1000) & 0xffffffff if i == 2 else 0, 0]
    if r == 'pair_epoch':
        return [0 if i == 4096 + 0 * 64 + 2 else 9, 0]
    if r == 'pair_bytes':
        return [5000 if i in (4096 + 2, 3 * 4096 + 2) else 0, 0]
    if r == 'flow_epoch':
        return [0, 7] if i == 4096 + 77 else [3, 3]
    flow = {'flow_src': 0x0a010001, 'flow_dst': 0x0a020002, 'flow_ports': (49152 << 16) | 4791, 'flow_hop': (0 << 6) | 2,
            'flow_pkts': 9, 'flow_qdepth': 2700, 'flow_paused': 3}
    if r in flow:
        return [flow[r] if i == 4096 + 77 else 0, 0]
    return [0, 0]
`

func TestReadScriptRuns(t *testing.T) {
	p := leaf(t)
	s, err := p.ReadScript(testWindow)
	if err != nil {
		t.Fatal(err)
	}
	out := p4test.RunBfrt(t, readAnswers, "file", s)
	regs, err := p.ParseRegisters(strings.NewReader(out), testWindow)
	if err != nil {
		t.Fatal(err)
	}
	if got := regs.Ports[1][2]; got != (PortRead{Epoch: 0, Packets: 10, Qdepth: 3000, Paused: 3, PFCFrames: 2}) {
		t.Errorf("spine0 slot 1: %+v", got)
	}
	if regs.Ports[2][1].Epoch != 200 || regs.Ports[3][0].Epoch != 255 {
		t.Errorf("epoch ids %d %d", regs.Ports[2][1].Epoch, regs.Ports[3][0].Epoch)
	}
	if len(regs.Meters) != 1 || regs.Meters[0] != (MeterRead{Slot: 1, In: 0, Out: 2, Bytes: 5000}) {
		t.Errorf("meters %+v", regs.Meters)
	}
	want := FlowRead{Slot: 1, Index: 77, Pipe: 0, Key: hawkeyewire.FlowKey{Src: 0x0a010001, Dst: 0x0a020002, Sport: 49152, Dport: 4791, Proto: 17},
		In: 0, Out: 2, Packets: 9, Qdepth: 2700, Paused: 3}
	if len(regs.Flows) != 1 || regs.Flows[0] != want {
		t.Errorf("flows %+v", regs.Flows)
	}
	if until := int64(4097<<EpochShift + 5 + 1000); regs.PauseUntil[2] != uint32(until) {
		t.Errorf("timer %d", regs.PauseUntil[2])
	}
	// The same script fed line by line, as bfshell does.
	if out2 := p4test.RunBfrt(t, readAnswers, "interactive", s); !strings.Contains(out2, RegisterPrefix+`{"kind": "end", "records": 22}`) {
		t.Errorf("interactive run: no end record of 22 records")
	}
}

// TestParseRegistersStrict: output cut short, a port missing or twice, a
// record of an epoch not read or too wide for its register is an error.
func TestParseRegistersStrict(t *testing.T) {
	p := leaf(t)
	w := NewWindow(5<<EpochShift, 1) // slot 1, id 1
	var lines []string
	for i, pt := range p.Ports {
		dev := itoa(pt.DevPort)
		if pt.FrontPanel != "" {
			dev = "140" // as the switch resolves it
		}
		lines = append(lines, RegisterPrefix+`{"kind": "port", "slot": 1, "port": `+itoa(i)+`, "dev": `+dev+`, "epoch": 1, "packets": 1, "qdepth": 0, "paused": 0, "pfc_frames": 0}`)
		lines = append(lines, RegisterPrefix+`{"kind": "timer", "port": `+itoa(i)+`, "dev": `+dev+`, "until": 0}`)
	}
	end := RegisterPrefix + `{"kind": "end", "records": ` + itoa(len(lines)) + `}`
	good := strings.Join(append(lines, end), "\n")
	regs, err := p.ParseRegisters(strings.NewReader("bfrt_python> \n"+good), w)
	if err != nil {
		t.Fatalf("good output: %v", err)
	}
	if want := []int{0, 4, 8, 140}; !slices.Equal(regs.Dev, want) {
		t.Errorf("dev ports %v, want %v", regs.Dev, want)
	}
	for name, text := range map[string]string{
		"cut short":   strings.Join(lines, "\n"),
		"port twice":  strings.Join(append(append([]string{}, lines...), lines[0], strings.Replace(end, itoa(len(lines)), itoa(len(lines)+1), 1)), "\n"),
		"port absent": strings.Join(append(append([]string{}, lines[1:]...), strings.Replace(end, itoa(len(lines)), itoa(len(lines)-1), 1)), "\n"),
		"slot unread": strings.Replace(good, `"slot": 1, "port": 0`, `"slot": 2, "port": 0`, 1),
		"too wide":    strings.Replace(good, `"epoch": 1, "packets": 1`, `"epoch": 256, "packets": 1`, 1),
		"unknown":     strings.Replace(good, `"kind": "timer"`, `"kind": "clock"`, 1),
		"extra field": strings.Replace(good, `"until": 0`, `"until": 0, "x": 1`, 1),
		"wrong dev":   strings.Replace(good, `"port": 1, "dev": 4`, `"port": 1, "dev": 5`, 1),
		"dev changes": strings.Replace(good, `"port": 3, "dev": 140, "until"`, `"port": 3, "dev": 141, "until"`, 1),
	} {
		if _, err := p.ParseRegisters(strings.NewReader(text), w); !errors.Is(err, ErrRegisters) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestFrames: the CPU's copy and an eviction read back as written; other
// frames are refused.
func TestFrames(t *testing.T) {
	poll := hawkeyewire.Poll{Type: hawkeyewire.TypeBoth, Event: 9, Victim: hawkeyewire.FlowKey{Src: 1, Dst: 2, Sport: 3, Dport: 4791, Proto: 17}}
	f := poll.AppendFrame(nil, [6]byte{1}, [6]byte{2})
	b := AppendCPUCopy(nil, 300, 0xdeadbeef, f)
	cp, ok := ParseCPUCopy(b)
	if !ok || cp.Ingress != 300 || cp.Time != 0xdeadbeef || cp.Header.Poll() != poll || string(cp.Frame) != string(f) {
		t.Fatalf("copy %+v %v", cp, ok)
	}
	e := Evicted{Time: 77, Key: poll.Victim, In: 3, Out: 63, Packets: 5, Qdepth: 6, Paused: 7}
	got, ok := ParseEvicted(e.Append(nil))
	if !ok || got != e {
		t.Fatalf("evicted %+v %v", got, ok)
	}
	for _, bad := range [][]byte{nil, b[:20], e.Append(nil)[:30], f} {
		if _, ok := ParseCPUCopy(bad); ok {
			t.Errorf("copy from %x", bad)
		}
		if _, ok := ParseEvicted(bad); ok {
			t.Errorf("eviction from %x", bad)
		}
	}
}

// BenchmarkCPUTakeEvicted: an evicted flow from the CPU's port into the
// ring the reports read (a collision per packet at worst: the data plane
// mirrors one per collision).
func BenchmarkCPUTakeEvicted(b *testing.B) {
	l := ring.Named("hawkbench", ring.Config{})
	defer ring.Forget("hawkbench")
	c, err := NewCPU(CPUConfig{Program: leaf(b), Switch: "leaf", Port: l.A(),
		Bfshell: func(context.Context, string) ([]byte, error) { return nil, errors.New("not read") }})
	if err != nil {
		b.Fatal(err)
	}
	e := Evicted{Time: 1 << 20, Key: hawkeyewire.FlowKey{Src: 1, Dst: 2, Sport: 3, Dport: 4791, Proto: 17}, In: 1, Out: 2, Packets: 9}
	f := e.Append(nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f[4] = byte(i) // the time moves on
		c.Take(ctx, f, 0)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mframes/s")
	if c.Stats().Evicted != uint64(b.N) {
		b.Fatalf("%d taken", c.Stats().Evicted)
	}
}

// FuzzCPUTake: any frame on the CPU's port is taken as a poll copy, an
// eviction or counted malformed, without panic; a poll copy's read fails
// here and is counted.
func FuzzCPUTake(f *testing.F) {
	poll := hawkeyewire.Poll{Type: hawkeyewire.TypeFlow, Event: 1, Victim: hawkeyewire.FlowKey{Src: 1, Dst: 2, Dport: 4791, Proto: 17}}
	f.Add(AppendCPUCopy(nil, 0, 5, poll.AppendFrame(nil, [6]byte{}, [6]byte{})))
	f.Add(Evicted{Time: 9, In: 1, Out: 2}.Append(nil))
	f.Add([]byte{pktEvict, 0, 0})
	l := ring.Named("hawkfuzz", ring.Config{})
	defer ring.Forget("hawkfuzz")
	c, err := NewCPU(CPUConfig{Program: leaf(f), Switch: "leaf", Port: l.A(), CollectInterval: 1, DedupNs: 1, MaxEvicted: 8,
		Bfshell: func(context.Context, string) ([]byte, error) { return nil, errors.New("no switch") }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		before := c.Stats()
		c.Take(context.Background(), b, 0)
		s := c.Stats()
		if d := s.Polls + s.Evicted + s.Malformed - before.Polls - before.Evicted - before.Malformed; d != 1 {
			t.Fatalf("a frame counted %d times", d)
		}
		if s.Reports != 0 || s.Collections != 0 {
			t.Fatalf("reported without a read: %+v", s)
		}
	})
}
