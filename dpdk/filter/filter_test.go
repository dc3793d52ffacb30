package filter

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestBadInput: a filter that does not compile names what is wrong and
// where; tcpdump, when installed, refuses the same expressions.
func TestBadInput(t *testing.T) {
	cases := []struct {
		expr string
		pos  int
		msg  string
	}{
		{"hots 10.0.0.1", 0, `"hots" is not a keyword`},
		{"host", 4, "want an address"},
		{"host 10.0.0.1 and", 17, "want a primitive"},
		{"port 70000", 5, "not a port number"},
		{"udp[8:3] = 1", 6, "load size must be 1, 2 or 4"},
		{"ip[0 = 1", 5, "want ]"},
		{"(tcp", 4, "want )"},
		{"tcp port 80)", 11, "unexpected"},
		{"net 10.0.0.1/8", 4, "non-network bits"},
		{"ip6 host 10.0.0.1", 9, "IPv4 address"},
		{"tcp host 10.0.0.1", 9, "modifier applied to host"},
		{"ether host 10.0.0.1", 11, "not a MAC address"},
		{"ip port 80", 8, "illegal qualifier"},
		{"vlan 5000", 5, "0..4095"},
		{"host example.com", 5, "host names are not resolved"},
		{"len > 1 $", 8, "unexpected character"},
		{"ether", 5, "want an address"},
	}
	tcpdump, _ := exec.LookPath("tcpdump")
	for _, c := range cases {
		_, err := Compile(c.expr, Options{})
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: got %v, want a SyntaxError", c.expr, err)
			continue
		}
		if se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: %v (position %d), want %q at %d\n%s", c.expr, err, se.Pos, c.msg, c.pos, se.Caret())
		}
		if tcpdump != "" {
			if prog, err := tcpdumpProgram(t, tcpdump, c.expr, true); err == nil {
				t.Errorf("%q: tcpdump compiles it (%d instructions), we refuse it", c.expr, len(prog))
			}
		}
	}
}

// TestLongProgram: jumps further than 255 instructions go through
// unconditional jumps, and the kernel's instruction limit is enforced.
func TestLongProgram(t *testing.T) {
	var parts []string
	for i := 0; i < 200; i++ {
		parts = append(parts, "udp[8] = "+itoa(i))
	}
	expr := "ip and (" + strings.Join(parts, " or ") + ")"
	p, err := Compile(expr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Wire) < 300 {
		t.Fatalf("only %d instructions", len(p.Wire))
	}
	if err := Validate(p.Wire); err != nil {
		t.Fatal(err)
	}
	frames := testFrames(2000)
	for _, f := range frames {
		want := 0
		if q, _ := Compile("ip and udp and udp[8] < 200", Options{}); q.Match(f, len(f)) != 0 {
			want = DefaultSnapLen
		}
		if got := p.Match(f, len(f)); got != want {
			t.Fatalf("frame % x: %d, want %d", f, got, want)
		}
		if got := newVM(p.Wire)(f); got != want {
			t.Fatalf("x/net/bpf: frame % x: %d, want %d", f, got, want)
		}
	}
	for i := 0; i < 1200; i++ {
		parts = append(parts, "udp[8] = "+itoa(i))
	}
	if _, err := Compile(strings.Join(parts, " or "), Options{}); err == nil || !strings.Contains(err.Error(), "more than the kernel's 4096") {
		t.Fatalf("a 1400-term filter: %v", err)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestSnapLen: a match returns the snap length, which the kernel copies.
func TestSnapLen(t *testing.T) {
	p, err := Compile("udp", Options{SnapLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range [][]uint32{{p.Wire[len(p.Wire)-2].K}, {p.Kernel[len(p.Kernel)-2].K}} {
		if prog[0] != 128 {
			t.Errorf("accept returns %d, want 128", prog[0])
		}
	}
	if all, _ := Compile("", Options{}); !all.All {
		t.Error("the empty filter is not All")
	}
}

func TestMatchAllocs(t *testing.T) {
	p, err := Compile("udp dst port 4791 and udp[12:4] & 0xffffff = 17", Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := testFrames(1)[0]
	if n := testing.AllocsPerRun(1000, func() { p.Match(f, len(f)) }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
}

func FuzzCompile(f *testing.F) {
	for _, e := range diffExprs {
		f.Add(e)
	}
	frames := testFrames(64)
	f.Fuzz(func(t *testing.T, expr string) {
		p, err := Compile(expr, Options{SnapLen: 96})
		if err != nil {
			var se *SyntaxError
			if errors.As(err, &se) && (se.Pos < 0 || se.Pos > len(expr)) {
				t.Fatalf("%q: position %d outside the expression", expr, se.Pos)
			}
			return
		}
		if err := Validate(p.Wire); err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		if err := Validate(p.Kernel); err != nil {
			t.Fatalf("%q: kernel: %v", expr, err)
		}
		for _, fr := range frames {
			if got, ref := p.Match(fr, len(fr)), newVM(p.Wire)(fr); (got != 0) != (ref != 0) && !p.All {
				t.Fatalf("%q: our VM %d, x/net/bpf %d", expr, got, ref)
			}
		}
	})
}
