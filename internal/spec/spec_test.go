package spec

import (
	"errors"
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
