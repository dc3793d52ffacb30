package spec

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

type nic struct {
	Type   string   `yaml:"type"`
	IfName string   `yaml:"if-name"`
	IPs    []string `yaml:"ip-list"`
}

type host struct {
	ControlIP string `yaml:"control-ip"`
	NIC       nic    `yaml:"nic"`
}

type event struct {
	QPN  int    `yaml:"qpn"`
	PSN  string `yaml:"psn"`
	Type string `yaml:"type"`
}

type testSpec struct {
	Repeats   int               `yaml:"num-repeats"`
	Requester host              `yaml:"requester"`
	Events    []event           `yaml:"data-pkt-events"`
	Labels    map[string]string `yaml:"labels"`
}

const good = `num-repeats: 2
requester:
  control-ip: 10.0.0.1
  nic:
    type: CX6
    if-name: eth0
    ip-list: [192.168.1.1]
data-pkt-events:
  - {qpn: 0, psn: "4", type: drop}
  - qpn: 1
    psn: all
    type: ecn
labels:
  anything: goes
`

func TestDecodeGood(t *testing.T) {
	var s testSpec
	d, err := Decode("t.yml", []byte(good), &s)
	if err != nil {
		t.Fatal(err)
	}
	if s.Repeats != 2 || s.Requester.NIC.Type != "CX6" || len(s.Events) != 2 || s.Events[1].PSN != "all" {
		t.Fatalf("decoded %+v", s)
	}
	if l := d.Line("data-pkt-events[1].type"); l != 12 {
		t.Fatalf("line of events[1].type = %d, want 12", l)
	}
	if l := d.Line("requester.nic.missing-key"); l != 4 {
		t.Fatalf("line of an absent key = %d, want its parent's 4", l)
	}
	d.Errorf("data-pkt-events[1].qpn", "QP %d does not exist", 1)
	err = d.Err()
	if err == nil || err.Error() != "t.yml:10: data-pkt-events[1].qpn: QP 1 does not exist" {
		t.Fatalf("validation error = %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 10 {
		t.Fatalf("errors.As: %v", e)
	}
}

func TestUnknownKeys(t *testing.T) {
	in := strings.Replace(good, "if-name: eth0", "if-nme: eth0", 1)
	in = strings.Replace(in, "    type: ecn", "    typ: ecn", 1)
	var s testSpec
	_, err := Decode("t.yml", []byte(in), &s)
	if err == nil {
		t.Fatal("unknown keys accepted")
	}
	want := []string{
		`t.yml:6: requester.nic.if-nme: unknown key (did you mean "if-name"?)`,
		`t.yml:12: data-pkt-events[1].typ: unknown key (did you mean "type"?)`,
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

func TestTypeAndSyntaxErrors(t *testing.T) {
	var s testSpec
	_, err := Decode("t.yml", []byte("num-repeats: many\n"), &s)
	if err == nil || !strings.HasPrefix(err.Error(), "t.yml:1: num-repeats: cannot unmarshal") {
		t.Fatalf("type error: %v", err)
	}
	_, err = Decode("t.yml", []byte("num-repeats: 1\nnum-repeats: 2\n"), &s)
	if err == nil || !strings.Contains(err.Error(), "t.yml:2") || !strings.Contains(err.Error(), "already defined") {
		t.Fatalf("duplicate key: %v", err)
	}
	_, err = Decode("t.yml", []byte("a: [1, 2\n"), &s)
	if err == nil || !strings.HasPrefix(err.Error(), "t.yml:") {
		t.Fatalf("syntax error: %v", err)
	}
	if _, err := LoadFile("/nonexistent/x.yml", &s); err == nil || !strings.Contains(err.Error(), "/nonexistent/x.yml") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestEmptyDocument(t *testing.T) {
	var s testSpec
	if _, err := Decode("e.yml", nil, &s); err != nil {
		t.Fatal(err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("requester: {nic: {ip-list: [a, b]}}\n"))
	f.Add([]byte("&a x: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s testSpec
		d, err := Decode("f.yml", data, &s)
		if err == nil {
			_ = d.Line("requester.nic.type")
		}
	})
}

// A file that repeats its blocks names each repeated key once, against its
// first definition, and lists at most MaxErrors problems: yaml.v3 alone
// reports every pair of repeats, quadratic in the file (a fuzzer's 90 KB
// input took over a second).
func TestRepeatedKeysBounded(t *testing.T) {
	var s testSpec
	_, err := Decode("t.yml", []byte(strings.Repeat(good, 3)), &s)
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("want Errors, got %v", err)
	}
	if es[0].Line != 15 || es[0].Key != "num-repeats" || es[0].Msg != `mapping key "num-repeats" already defined at line 1` {
		t.Fatalf("first problem: %+v", es[0])
	}
	// 4 top-level keys, repeated twice: 8 problems, each once.
	if len(es) != 8 {
		t.Fatalf("%d problems, want 8:\n%v", len(es), err)
	}
	for _, e := range es {
		if !strings.Contains(e.Msg, "already defined at line") || strings.Contains(e.Msg, "line 15") {
			t.Fatalf("not against the first definition: %v", e)
		}
	}

	_, err = Decode("t.yml", []byte(strings.Repeat(good, 200)), &s)
	if !errors.As(err, &es) || len(es) != MaxErrors+1 {
		t.Fatalf("want %d listed problems and a count, got %d", MaxErrors, len(es))
	}
	if last := es[len(es)-1]; last.Msg != fmt.Sprintf("%d more problems not listed", 199*4-MaxErrors) {
		t.Fatalf("last: %v", last)
	}

	labels := "labels:\n" + strings.Repeat("  k: v\n", 3)
	_, err = Decode("t.yml", []byte(labels), &s)
	if err == nil || !strings.Contains(err.Error(), `t.yml:3: labels.k: mapping key "k" already defined at line 2`) {
		t.Fatalf("map keys: %v", err)
	}
}

// Nested aliases expand exponentially; each anchor is checked once.
func TestAliasBombChecked(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [{qpn: 0, psn: \"1\", type: drop, bogus: 1}]\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d]\n", i, i, i-1, i-1)
	}
	var s map[string][]any
	if _, err := Decode("t.yml", []byte(b.String()), &s); err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Fatalf("2^39 expansion: %v", err)
	}
	var typed struct {
		A0     []event   `yaml:"a0"`
		Events [][]event `yaml:"e"`
	}
	_, err := Decode("t.yml", []byte("a0: &x [{qpn: 0, psn: \"1\", type: drop, bogus: 1}]\ne: [*x, *x, *x]\n"), &typed)
	if err == nil || strings.Count(err.Error(), "bogus") != 1 {
		t.Fatalf("an anchor's problem is listed once: %v", err)
	}
}

func TestErrorfBounded(t *testing.T) {
	var s testSpec
	d, err := Decode("t.yml", []byte(good), &s)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		d.Errorf(fmt.Sprintf("data-pkt-events[%d]", i), "bad %d", i)
	}
	var es Errors
	if !errors.As(d.Err(), &es) || len(es) != MaxErrors+1 || es[MaxErrors].Msg != "950 more problems not listed" {
		t.Fatalf("got %d: %v", len(es), es[len(es)-1])
	}
	first := d.Err().Error()
	if again := d.Err().Error(); again != first {
		t.Fatalf("Err changes between calls:\n%s\n%s", first, again)
	}
}

// validSpec is a testSpec that validates itself: at least one repeat.
type validSpec testSpec

func (c *validSpec) Validate(doc *Doc) {
	if c.Repeats < 1 {
		doc.Errorf("num-repeats", "at least 1, got %d", c.Repeats)
	}
}

// TestLoadAs: the generic loaders return the decoded value when it is
// valid, and the zero value with the problem at its file, line and key
// when it is not (from a file too).
func TestLoadAs(t *testing.T) {
	c, err := DecodeAs[validSpec]("good.yml", []byte(good))
	if err != nil || c.Repeats != 2 || c.Requester.NIC.Type != "CX6" {
		t.Fatalf("%+v, %v", c, err)
	}
	bad := strings.Replace(good, "num-repeats: 2", "num-repeats: 0", 1)
	c, err = DecodeAs[validSpec]("bad.yml", []byte(bad))
	if err == nil || !strings.Contains(err.Error(), "bad.yml:1") || !strings.Contains(err.Error(), "num-repeats") || c.Requester.ControlIP != "" {
		t.Fatalf("%+v, %v", c, err)
	}
	path := t.TempDir() + "/bad.yml"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = LoadAs[validSpec](path); err == nil || !strings.Contains(err.Error(), path+":1") || c.Repeats != 0 {
		t.Fatalf("%+v, %v", c, err)
	}
}
