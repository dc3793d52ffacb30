package hawkeyetofino

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
)

// FuzzParseRegisters: bfshell's output of the read script (the switch's
// word) is read or refused with ErrRegisters, never a panic; what is read
// has every port of every slot read, nothing in a slot not read, and
// meters and flows whose ports are the program's.
func FuzzParseRegisters(f *testing.F) {
	p := leaf(f)
	var lines []string // slot 1, id 1: NewWindow(5<<EpochShift, 1)
	for i, pt := range p.Ports {
		dev := itoa(pt.DevPort)
		if pt.FrontPanel != "" {
			dev = "140"
		}
		lines = append(lines, RegisterPrefix+`{"kind": "port", "slot": 1, "port": `+itoa(i)+`, "dev": `+dev+`, "epoch": 1, "packets": 1, "qdepth": 0, "paused": 0, "pfc_frames": 0}`)
		lines = append(lines, RegisterPrefix+`{"kind": "timer", "port": `+itoa(i)+`, "dev": `+dev+`, "until": 7}`)
	}
	lines = append(lines, RegisterPrefix+`{"kind": "meter", "slot": 1, "in": 0, "out": 2, "epoch": 1, "bytes": 5000}`,
		RegisterPrefix+`{"kind": "flow", "slot": 1, "index": 77, "pipe": 0, "epoch": 1, "src": 167837697, "dst": 167903234, "ports": 3221230263, "hop": 2, "packets": 9, "qdepth": 2700, "paused": 3}`)
	good := "bfrt_python> \n" + strings.Join(append(lines, RegisterPrefix+`{"kind": "end", "records": `+itoa(len(lines))+`}`), "\n") + "\n"
	f.Add(good, int64(5<<EpochShift), 1)
	f.Add(strings.Replace(good, `"hop": 2`, `"hop": 4095`, 1), int64(5<<EpochShift), 1)
	f.Add(strings.Replace(good, `"slot": 1, "index": 77`, `"slot": 3, "index": 77`, 1), int64(5<<EpochShift), 2)
	f.Add(good, int64(4097<<EpochShift+5), Epochs)
	f.Fuzz(func(t *testing.T, out string, now int64, read int) {
		if now < 0 || read < 1 || read > Epochs {
			return // ReadScript's callers' windows: switch time, 1 to Epochs epochs
		}
		w := NewWindow(now, read)
		regs, err := p.ParseRegisters(strings.NewReader(out), w)
		if err != nil {
			if !errors.Is(err, ErrRegisters) {
				t.Fatalf("error does not wrap ErrRegisters: %v", err)
			}
			return
		}
		n := len(p.Ports)
		ids := w.slotIDs()
		for k := range Epochs {
			if (ids[k] >= 0) != (len(regs.Ports[k]) == n) || (ids[k] < 0 && regs.Ports[k] != nil) {
				t.Fatalf("slot %d (id %d): %d ports read", k, ids[k], len(regs.Ports[k]))
			}
		}
		for i, d := range regs.Dev {
			if d < 0 || d >= bfrt.DevPorts {
				t.Fatalf("port %d: dev port %d", i, d)
			}
		}
		for _, m := range regs.Meters {
			if ids[m.Slot] < 0 || m.In < 0 || m.In >= n || m.Out < 0 || m.Out >= n || m.Bytes == 0 {
				t.Fatalf("meter %+v", m)
			}
		}
		for _, fl := range regs.Flows {
			if ids[fl.Slot] < 0 || fl.In >= n || fl.Out >= n || fl.Packets == 0 || fl.Key.Proto != protoUDP {
				t.Fatalf("flow %+v", fl)
			}
		}
	})
}
