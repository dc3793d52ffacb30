package stf

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Output is a frame a model sent out of a port.
type Output struct {
	Port  int
	Frame []byte
}

// Model runs one test's packet through a Go model set up from the test's
// table entries and returns what it sent. A non-empty skip says the test
// is outside what the model is (with the reason); an error says the
// adapter could not map an entry, which fails the test.
type Model func(tc *Test) (outs []Output, skip string, err error)

// Known lists tests whose expectation is known to be wrong, by test name,
// with the reason (a P4Testgen modelling error, for instance). A known
// test must still fail: when it passes, the list is out of date and the
// replay says so.
type Known map[string]string

// Report counts a replay's outcomes.
type Report struct {
	Tests, Passed int
	Skipped       map[string]int // by reason
	Known         map[string]int // by reason
	Failed        []string
}

// Replay runs every test of dir against model and fails the test for
// every unexpected outcome: a drop where P4Testgen expects a packet, a
// packet where it expects a drop, a packet on another port or with other
// bytes under the masks, more than one packet.
func Replay(t *testing.T, dir string, model Model, known Known) Report {
	t.Helper()
	tests, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep := Report{Skipped: map[string]int{}, Known: map[string]int{}}
	seen := map[string]bool{}
	for _, tc := range tests {
		rep.Tests++
		seen[tc.Name] = true
		if tc.EgressMisparsed() {
			// make p4check generates with -DP4TESTGEN, under which the
			// programs read no egress_rid (see EgressMisparsed).
			t.Errorf("%s: P4Testgen misparsed the egress: its expected packet is not the program's (a read of egress_rid "+
				"outside EGRESS_RID()?)", tc.Name)
			rep.Failed = append(rep.Failed, tc.Name)
			continue
		}
		outs, skip, err := model(tc)
		if err != nil {
			t.Errorf("%s: %v", tc.Name, err)
			rep.Failed = append(rep.Failed, tc.Name)
			continue
		}
		if skip != "" {
			rep.Skipped[skip]++
			continue
		}
		verr := Verify(tc, outs)
		reason, isKnown := known[tc.Name]
		switch {
		case verr == nil && isKnown:
			t.Errorf("%s passes but is listed as known to fail (%s): take it off the list", tc.Name, reason)
			rep.Failed = append(rep.Failed, tc.Name)
		case verr == nil:
			rep.Passed++
		case isKnown:
			rep.Known[reason]++
		default:
			t.Errorf("%s: %v\n%s", tc.Name, verr, tc.Path())
			rep.Failed = append(rep.Failed, tc.Name)
		}
	}
	for name := range known {
		if !seen[name] {
			t.Errorf("%s is listed as known to fail but is no test of %s", name, dir)
		}
	}
	t.Log(rep.String())
	return rep
}

// DropPort is the dev port P4Testgen's Tofino model takes as a drop: no
// MAC serves it, and the control planes never send to it. A model's
// output there is no output.
const DropPort = 511

// Verify checks a model's outputs against the test's expectation.
func Verify(tc *Test, outs []Output) error {
	outs = slices.DeleteFunc(slices.Clone(outs), func(o Output) bool { return o.Port == DropPort })
	switch {
	case tc.Expect == nil && len(outs) == 0:
		return nil
	case tc.Expect == nil:
		return fmt.Errorf("P4Testgen expects a drop; the model sent %d packet(s), the first on port %d:\n %x", len(outs),
			outs[0].Port, outs[0].Frame)
	case len(outs) == 0:
		return fmt.Errorf("the model dropped the packet; P4Testgen expects it on port %d", tc.Expect.Port)
	case len(outs) > 1:
		return fmt.Errorf("the model sent %d packets; P4Testgen expects one", len(outs))
	}
	return tc.Expect.Match(outs[0].Port, outs[0].Frame)
}

// String summarises the report.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tests: %d pass", r.Tests, r.Passed)
	for _, k := range slices.Sorted(maps.Keys(r.Skipped)) {
		fmt.Fprintf(&b, "; %d outside the model (%s)", r.Skipped[k], k)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Known)) {
		fmt.Fprintf(&b, "; %d known wrong (%s)", r.Known[k], k)
	}
	if len(r.Failed) > 0 {
		fmt.Fprintf(&b, "; %d FAIL", len(r.Failed))
	}
	return b.String()
}

// Path is the trace's table branches and if decisions, for failure
// messages.
func (tc *Test) Path() string {
	var out []string
	for _, l := range tc.Trace {
		if strings.HasPrefix(l, "[Table Branch") || strings.HasPrefix(l, "[If Statement]") || strings.HasPrefix(l, "[State]") {
			out = append(out, "  "+l)
		}
	}
	return strings.Join(out, "\n")
}

var (
	ethEmitRE    = regexp.MustCompile(`^\[Emit\]: \{\$headerValid:true;;\s+dst_addr:(\d+);\s+src_addr:(\d+);\s+ether_type:(\d+);\s+\}$`)
	ethExtractRE = regexp.MustCompile(`^\[ExtractSuccess\] hdr\.ethernet@\d+ .*-> hdr\.ethernet\.dst_addr = (0x[0-9A-F_]+) \| ` +
		`hdr\.ethernet\.src_addr = (0x[0-9A-F_]+) \| hdr\.ethernet\.ether_type = (0x[0-9A-F_]+)`)
)

// EgressMisparsed reports whether P4Testgen's egress parser read another
// Ethernet header (hdr.ethernet {dst_addr, src_addr, ether_type}, as the
// programs here name it) than its ingress deparser wrote. Its Tofino model
// prepends the egress intrinsic metadata fields a program uses, and
// initialises egress_rid as a 1-bit unknown where the field is 16 bits
// wide (TofinoCmdStepper::initializeTargetEnvironment declares its type
// with Type_Bits::get(1)): a program that reads egress_rid gets its
// bridged header and frame read misaligned, and the egress path and the
// expected packet of such a test are not the program's. The programs read
// the field through a macro, EGRESS_RID, that is 0 (a unicast packet's
// replication id: P4Testgen follows no multicast copy into egress) in the
// -DP4TESTGEN builds make p4check generates tests from, and Replay fails
// a misparsed test. testdata/egress_rid holds a small program that shows
// the misread.
func (tc *Test) EgressMisparsed() bool {
	var emitted []string
	egress := false
	for _, l := range tc.Trace {
		if strings.Contains(l, "*.StartEgress()") {
			egress = true
			continue
		}
		if !egress {
			if m := ethEmitRE.FindStringSubmatch(l); m != nil {
				emitted = m[1:]
			}
			continue
		}
		if m := ethExtractRE.FindStringSubmatch(l); m != nil {
			if emitted == nil {
				return true
			}
			for i := range 3 {
				v, _ := strconv.ParseUint(strings.ReplaceAll(strings.TrimPrefix(m[i+1], "0x"), "_", ""), 16, 64)
				if strconv.FormatUint(v, 10) != emitted[i] {
					return true
				}
			}
			return false
		}
	}
	return false
}
