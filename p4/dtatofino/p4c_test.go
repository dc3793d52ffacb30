package dtatofino

import (
	"testing"

	"github.com/rdma-appliance/appliance/p4/internal/p4test"
)

// TestP4FrontEnd runs p4c's front end on both programs in every build the
// package describes: the default, with the 2-byte base header (the ICRC
// is in both), with Append batches of 1 and 2 (the default's is 4), with
// Sketch-Merge (with and without the sequence number), with the rate meter
// (with and without the sequence number, and with Sketch-Merge), and the
// -DP4TESTGEN builds make p4check generates tests from. Warnings fail the test too. p4/check.sh checks the
// default builds for make test.
func TestP4FrontEnd(t *testing.T) {
	for _, tc := range []struct {
		prog  string
		flags []string
	}{
		{translatorP4, nil},
		{translatorP4, []string{"-DDTA_NO_SEQNUM"}},
		{translatorP4, []string{"-DDTA_APPEND_BATCH=1"}},
		{translatorP4, []string{"-DDTA_APPEND_BATCH=2"}},
		{translatorP4, []string{"-DP4TESTGEN"}},
		{translatorP4, []string{"-DDTA_SKETCH_MERGE"}},
		{translatorP4, []string{"-DDTA_SKETCH_MERGE", "-DDTA_NO_SEQNUM", "-DDTA_NO_METER"}},
		{translatorP4, []string{"-DDTA_NO_METER"}},
		{translatorP4, []string{"-DDTA_NO_METER", "-DDTA_NO_SEQNUM"}},
		{translatorP4, []string{"-DDTA_SKETCH_MERGE", "-DDTA_NO_SEQNUM"}},
		{reporterP4, nil},
		{reporterP4, []string{"-DDTA_NO_SEQNUM"}},
	} {
		p4test.FrontEnd(t, tc.prog, tc.flags...)
	}
}
