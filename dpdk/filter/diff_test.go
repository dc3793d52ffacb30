package filter

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
)

var update = flag.Bool("update", false, "rewrite testdata/tcpdump.txt from the installed tcpdump")

// diffExprs are the expressions the differential test compiles with both
// tcpdump and this package.
var diffExprs = []string{
	"", "ip", "ip6", "arp", "rarp", "tcp", "udp", "icmp", "icmp6", "sctp",
	"host 10.0.0.1", "src host 10.0.0.1", "dst host 10.0.0.2", "ip host 10.0.0.1", "arp host 10.0.0.1",
	"src and dst host 10.0.0.1", "src or dst host 10.0.0.2", "host 10.0.0.1 or 10.0.0.2",
	"net 10.0.0.0/24", "net 10.0", "src net 10.1.0.0 mask 255.255.0.0", "dst net 192.168.0.0/16", "net 0.0.0.0/0",
	"host fe80::1", "ip6 src host fe80::2", "net fe80::/10", "ip6 dst net 2001:db8::/32", "net 2001:db8:0:1::/64",
	"ether host 02:00:00:00:00:01", "ether src 02:00:00:00:00:02", "ether dst 02:00:00:00:00:01",
	"ether host 0200.0000.0001", "ether broadcast", "ether multicast", "broadcast", "multicast",
	"ip multicast", "ip6 multicast",
	"port 4791", "udp port 4791", "tcp port 80", "src port 53", "dst port 4791", "udp dst port 4791",
	"port 80 or 443", "tcp port 80 and not 443", "portrange 100-200", "udp portrange 4790-4792",
	"tcp src portrange 1-1024", "sctp port 9", "ip6 and udp port 4791", "ip and tcp",
	"ether proto 0x88cc", "ether proto \\arp", "ip proto 17", "ip proto \\udp", "ip6 proto 17", "proto 6", "ip6 proto 58",
	"vlan", "vlan 100", "vlan and udp", "vlan 100 and udp port 4791", "vlan and vlan", "vlan and vlan 5",
	"vlan 200 and host 10.0.0.1", "vlan or ip", "not vlan",
	"len > 100", "len <= 64", "less 100", "greater 200", "len = 60", "len - 14 > 50",
	"udp[8:4] = 1", "udp[8:4] & 0xffffff = 17", "udp[8] = 0x0a", "udp[8] = 0x81", "udp[12:4] & 0xffffff = 0x11",
	"udp[20:2] & 0xc0 = 0x40", "tcp[13] & 2 != 0", "tcp[tcpflags] & tcp-syn != 0",
	"tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn", "icmp[icmptype] = icmp-echo", "icmp[0] != 8",
	"ip[1] & 3 = 3", "ip[0] & 0xf > 5", "ip[2:2] - 20 > 100", "ip[6:2] & 0x1fff = 0", "ip6[1] & 0x30 = 0x30",
	"ether[0] & 1 = 0", "ether[12:2] = 0x800", "arp[7] = 1", "icmp6[0] = 128", "ip6[6] = 44",
	"not ip[100] = 1", "ip[len - 20] = 0", "udp[ip[0] & 0xf] > 3", "ip[2:2] > ip[0] & 0xf",
	"ip[8] * 2 + 1 > 100 / 2", "ip[8] % 7 = 3", "ip[8] ^ 0xff = 0xc0", "ip[8] << 2 > 200", "ip[8] >> 1 = 32",
	"-ip[8] & 0xff = 192", "(ip[8] | 1) = 65",
	"(udp and port 4791) or (tcp and port 80)", "not (ip or ip6)", "!arp && !ip6", "udp or tcp and not icmp",
	"ip and not (udp port 4791 or tcp)", "host 10.0.0.1 and (udp[8] = 0x0a or udp[8] = 0x11)",
	"src host 10.0.0.1 and dst host 10.0.0.2 and udp dst port 4791 and udp[12:4] & 0xffffff = 17",
	"(ip6 and udp dst port 4791) or (ip and udp dst port 4791 and ip[1] & 3 = 3)",
	"ip[1] & 3 = 3 and udp dst port 4791", "(len > 80)", "((tcp))",
}

// ruleFile holds tcpdump -ddd's programs for diffExprs, optimized and
// (keys with the unoptimized prefix) with -O.
const (
	ruleFile    = "testdata/tcpdump.txt"
	unoptimized = "-O "
)

// TestDifferentialTcpdump runs this package's program and tcpdump's
// program for each expression on a few thousand frames (every kind the
// grammar looks at, tagged and not, cut short, then mutated at random)
// and wants the same verdict on each. tcpdump's programs come from
// testdata, refreshed with -update; when tcpdump is installed they are
// also checked to be current.
func TestDifferentialTcpdump(t *testing.T) {
	want, err := readRules(ruleFile)
	if err != nil && !*update {
		t.Fatal(err)
	}
	if tcpdump, lerr := exec.LookPath("tcpdump"); lerr == nil {
		got := map[string][]bpf.RawInstruction{}
		for _, e := range diffExprs {
			for _, opt := range []bool{true, false} {
				key := e
				if !opt {
					key = unoptimized + e
				}
				prog, err := tcpdumpProgram(t, tcpdump, e, opt)
				if err != nil {
					t.Fatalf("tcpdump -ddd %q: %v", e, err)
				}
				got[key] = prog
				if !*update && fmt.Sprint(want[key]) != fmt.Sprint(prog) {
					t.Errorf("%s is stale for %q: run go test -run Differential -update", ruleFile, key)
				}
			}
		}
		if *update {
			writeRules(t, ruleFile, got)
			want = got
		}
	} else if *update {
		t.Fatal("-update needs tcpdump (apt-get install tcpdump)")
	} else {
		t.Logf("tcpdump not installed: using its programs from %s", ruleFile)
	}
	frames := testFrames(4000)
	total, accepted, undefined := 0, 0, 0
	for _, e := range diffExprs {
		theirs, ok := want[e]
		theirsO, okO := want[unoptimized+e]
		if !ok || !okO {
			t.Errorf("%s has no program for %q: run with -update", ruleFile, e)
			continue
		}
		ours, err := Compile(e, Options{})
		if err != nil {
			t.Errorf("Compile(%q): %v", e, err)
			continue
		}
		if err := Validate(ours.Wire); err != nil {
			t.Errorf("%q: wire program: %v", e, err)
		}
		if err := Validate(ours.Kernel); err != nil {
			t.Errorf("%q: kernel program: %v", e, err)
		}
		vmTheirs, vmTheirsO, vmOurs := newVM(theirs), newVM(theirsO), newVM(ours.Wire)
		bad := 0
		for i, f := range frames {
			a, ao := vmTheirs(f), vmTheirsO(f)
			b := ours.Match(f, len(f))
			c := vmOurs(f)
			total++
			if (a != 0) != (ao != 0) {
				// libpcap's optimizer drops or merges loads, so on a frame
				// cut inside a header tcpdump's verdict depends on -O:
				// ours must be one of its two.
				undefined++
				if (b != 0) != (a != 0) && (b != 0) != (ao != 0) || (b != 0) != (c != 0) {
					t.Errorf("%q frame %d: tcpdump %d, tcpdump -O %d, ours %d", e, i, a, ao, b)
				}
				continue
			}
			if (a != 0) != (b != 0) || (b != 0) != (c != 0) {
				if bad < 3 {
					t.Errorf("%q frame %d (%d bytes): tcpdump %d, ours %d (x/net/bpf VM on ours: %d)\n% x", e, i, len(f), a, b, c, f)
				}
				bad++
			}
			if a != 0 {
				accepted++
			}
		}
		if bad > 0 {
			t.Errorf("%q: %d of %d frames judged differently", e, bad, len(frames))
		}
	}
	t.Logf("%d expressions x %d frames = %d verdicts (%d accepts); %d frames cut inside a header where tcpdump and tcpdump -O disagree, ours one of theirs",
		len(diffExprs), len(frames), total, accepted, undefined)
}

// newVM runs prog on x/net/bpf's interpreter, an implementation
// independent of ours, or on ours for the few instructions it lacks (neg).
func newVM(prog []bpf.RawInstruction) func([]byte) int {
	ins := make([]bpf.Instruction, len(prog))
	for i, r := range prog {
		ins[i] = r.Disassemble()
	}
	vm, err := bpf.NewVM(ins)
	if err != nil || slices.ContainsFunc(ins, func(i bpf.Instruction) bool { _, neg := i.(bpf.NegateA); return neg }) {
		return func(f []byte) int { return Run(prog, f, len(f)) }
	}
	return func(f []byte) int {
		n, err := vm.Run(f)
		if err != nil {
			return 0
		}
		return n
	}
}

// tcpdumpProgram compiles e with tcpdump for an Ethernet savefile.
func tcpdumpProgram(t *testing.T, tcpdump, e string, optimize bool) ([]bpf.RawInstruction, error) {
	empty := filepath.Join(t.TempDir(), "empty.pcap")
	var hdr [24]byte
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 262144)
	binary.LittleEndian.PutUint32(hdr[20:], 1)
	if err := os.WriteFile(empty, hdr[:], 0o644); err != nil {
		return nil, err
	}
	args := []string{"-r", empty, "-ddd"}
	if !optimize {
		args = append(args, "-O")
	}
	if e != "" {
		args = append(args, "--", e)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(tcpdump, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, errb.String())
	}
	return parseDDD(out.String())
}

func parseDDD(s string) ([]bpf.RawInstruction, error) {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	n, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || n != len(lines)-1 {
		return nil, fmt.Errorf("bad -ddd output %q", s)
	}
	var prog []bpf.RawInstruction
	for _, l := range lines[1:] {
		var op, jt, jf, k uint64
		if _, err := fmt.Sscan(l, &op, &jt, &jf, &k); err != nil {
			return nil, fmt.Errorf("bad -ddd line %q", l)
		}
		prog = append(prog, bpf.RawInstruction{Op: uint16(op), Jt: uint8(jt), Jf: uint8(jf), K: uint32(k)})
	}
	return prog, nil
}

// The rule file: "expr: EXPR" then tcpdump's -ddd output, blank-line separated.
func readRules(path string) (map[string][]bpf.RawInstruction, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]bpf.RawInstruction{}
	for _, block := range strings.Split(string(b), "\n\n") {
		block = strings.TrimSpace(block)
		if block == "" || strings.HasPrefix(block, "#") {
			continue
		}
		head, rest, _ := strings.Cut(block, "\n")
		e, ok := strings.CutPrefix(head, "expr: ")
		if !ok {
			e = strings.TrimPrefix(head, "expr:")
		}
		prog, err := parseDDD(rest)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %v", path, e, err)
		}
		out[e] = prog
	}
	return out, nil
}

func writeRules(t *testing.T, path string, rules map[string][]bpf.RawInstruction) {
	var b bytes.Buffer
	b.WriteString("# tcpdump -ddd for an Ethernet savefile, one block per expression (go test -run Differential -update)\n\n")
	for _, e := range diffExprs {
		for _, key := range []string{e, unoptimized + e} {
			fmt.Fprintf(&b, "expr: %s\n%d\n", key, len(rules[key]))
			for _, r := range rules[key] {
				fmt.Fprintf(&b, "%d %d %d %d\n", r.Op, r.Jt, r.Jf, r.K)
			}
			b.WriteString("\n")
		}
	}
	if err := os.WriteFile(path, bytes.TrimSpace(b.Bytes()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testFrames builds n frames of the kinds the expressions look at, from a
// fixed seed: Ethernet with 0 to 2 VLAN tags of each TPID, IPv4 (with
// options, fragments), IPv6 (with a fragment header), ARP and RARP, UDP to
// RoCE's port and others with BTH-like payloads, TCP with flags, ICMP,
// ICMPv6, SCTP, addresses and ports from small pools so that hosts and ports
// match often; a quarter are cut short, and some have random bytes flipped.
func testFrames(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {1, 0, 0x5e, 0, 0, 1}}
	v4 := [][4]byte{{10, 0, 0, 1}, {10, 0, 0, 2}, {10, 1, 2, 3}, {192, 168, 1, 1}, {224, 0, 0, 5}, {10, 0, 0, 200}}
	v6 := [][16]byte{{0xfe, 0x80, 15: 1}, {0xfe, 0x80, 15: 2}, {0x20, 0x01, 0x0d, 0xb8, 7: 1, 15: 9}, {0xff, 0x02, 15: 1}, {0x20, 0x01, 0x0d, 0xb9, 15: 1}}
	ports := []uint16{4791, 80, 443, 53, 150, 4790, 9, 1024, 65535}
	frames := make([][]byte, 0, n)
	for len(frames) < n {
		f := make([]byte, 0, 256)
		f = append(f, macs[r.IntN(len(macs))][:]...)
		f = append(f, macs[r.IntN(len(macs))][:]...)
		tags := r.IntN(3)
		if r.IntN(2) == 0 {
			tags = 0
		}
		tpids := []uint16{0x8100, 0x88a8, 0x9100}
		for i := 0; i < tags; i++ {
			f = binary.BigEndian.AppendUint16(f, tpids[r.IntN(3)])
			vid := []uint16{100, 5, 200, 4095}[r.IntN(4)]
			f = binary.BigEndian.AppendUint16(f, uint16(r.IntN(8))<<13|vid)
		}
		kind := r.IntN(10)
		switch {
		case kind < 5:
			f = binary.BigEndian.AppendUint16(f, etIPv4)
			ihl := 5
			if r.IntN(8) == 0 {
				ihl = 5 + r.IntN(3)
			}
			ipStart := len(f)
			f = append(f, byte(0x40|ihl), byte(r.IntN(256)), 0, 0, 0, 1)
			frag := uint16(0)
			switch r.IntN(10) {
			case 0:
				frag = 0x2000 // more fragments, first
			case 1:
				frag = uint16(1 + r.IntN(100))
			case 2:
				frag = 0x4000 // don't fragment
			}
			f = binary.BigEndian.AppendUint16(f, frag)
			proto := []byte{ipUDP, ipUDP, ipUDP, ipTCP, ipICMP, ipSCTP, 47}[r.IntN(7)]
			f = append(f, byte(1+r.IntN(255)), proto, 0, 0)
			f = append(f, v4[r.IntN(len(v4))][:]...)
			f = append(f, v4[r.IntN(len(v4))][:]...)
			for i := 5; i < ihl; i++ {
				f = append(f, 1, 1, 1, 1)
			}
			f = appendL4(r, f, proto, ports)
			binary.BigEndian.PutUint16(f[ipStart+2:], uint16(len(f)-ipStart))
		case kind < 8:
			f = binary.BigEndian.AppendUint16(f, etIPv6)
			ipStart := len(f)
			f = append(f, 0x60|byte(r.IntN(16)), byte(r.IntN(256)), 0, 0, 0, 0)
			proto := []byte{ipUDP, ipUDP, ipTCP, ipICMPv6, ipSCTP, ipv6Frag}[r.IntN(6)]
			f = append(f, proto, 64)
			f = append(f, v6[r.IntN(len(v6))][:]...)
			f = append(f, v6[r.IntN(len(v6))][:]...)
			if proto == ipv6Frag {
				proto = []byte{ipUDP, ipTCP, ipICMPv6}[r.IntN(3)]
				f = append(f, proto, 0, 0, byte(r.IntN(2)), 0, 0, 0, 1)
			}
			f = appendL4(r, f, proto, ports)
			binary.BigEndian.PutUint16(f[ipStart+4:], uint16(len(f)-ipStart-40))
		case kind < 9:
			f = binary.BigEndian.AppendUint16(f, []uint16{etARP, etRARP}[r.IntN(2)])
			f = append(f, 0, 1, 8, 0, 6, 4, 0, byte(1+r.IntN(2)))
			f = append(f, macs[r.IntN(len(macs))][:]...)
			f = append(f, v4[r.IntN(len(v4))][:]...)
			f = append(f, macs[r.IntN(len(macs))][:]...)
			f = append(f, v4[r.IntN(len(v4))][:]...)
		default:
			f = binary.BigEndian.AppendUint16(f, []uint16{0x88cc, 0x8906, 0x0800, 0x86dd}[r.IntN(4)])
			for i := r.IntN(60); i > 0; i-- {
				f = append(f, byte(r.IntN(256)))
			}
		}
		for len(f) < 60 && r.IntN(2) == 0 {
			f = append(f, 0)
		}
		if r.IntN(4) == 0 {
			f = f[:r.IntN(len(f)+1)]
		}
		if r.IntN(5) == 0 && len(f) > 0 {
			for k := 1 + r.IntN(3); k > 0; k-- {
				f[r.IntN(len(f))] = byte(r.IntN(256))
			}
		}
		frames = append(frames, f)
	}
	return frames
}

func appendL4(r *rand.Rand, f []byte, proto byte, ports []uint16) []byte {
	switch proto {
	case ipUDP, ipTCP, ipSCTP:
		f = binary.BigEndian.AppendUint16(f, ports[r.IntN(len(ports))])
		f = binary.BigEndian.AppendUint16(f, ports[r.IntN(len(ports))])
		if proto == ipTCP {
			f = append(f, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, []byte{2, 0x12, 0x10, 0x18, 1, 4}[r.IntN(6)], 0xff, 0xff, 0, 0, 0, 0)
			break
		}
		f = append(f, 0, 0, 0, 0)
		// A BTH-like payload: opcode, flags, pkey, QPN, PSN, then an AETH.
		f = append(f, []byte{0x0a, 0x11, 0x81, 0x04, 0x64}[r.IntN(5)], 0x40, 0xff, 0xff, 0, 0, 0, byte([]int{17, 18, 0x11}[r.IntN(3)]))
		f = append(f, 0x80, 0, byte(r.IntN(4)), byte(r.IntN(256)), []byte{0x00, 0x60, 0x20, 0x63}[r.IntN(4)], 0, 0, 1)
		for i := r.IntN(40); i > 0; i-- {
			f = append(f, byte(r.IntN(256)))
		}
	case ipICMP, ipICMPv6:
		f = append(f, []byte{8, 0, 3, 128, 129, 135}[r.IntN(6)], 0, 0, 0, 0, 0, 0, 0)
	default:
		f = append(f, 1, 2, 3, 4)
	}
	return f
}

// TestRulesParse keeps the rule file well formed even without tcpdump.
func TestRulesParse(t *testing.T) {
	f, err := os.Open(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "expr: ") {
			n++
		}
	}
	if n != 2*len(diffExprs) {
		t.Errorf("%s has %d expressions, the test %d: run with -update", ruleFile, n, len(diffExprs))
	}
}
