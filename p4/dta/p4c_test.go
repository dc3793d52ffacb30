package dta

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestP4FrontEnd runs p4c's front end (the checker beside the repository,
// ../shared/tools/p4c) on both programs in every build the package
// describes: the default, with the data-plane ICRC, and with the 2-byte
// base header. Warnings fail the test too. p4/check.sh checks the default
// builds for make test.
func TestP4FrontEnd(t *testing.T) {
	chk, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "tools", "p4c", "check.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(chk); err != nil {
		t.Skipf("p4c checker not found at %s (it ships only beside the repository on dev/CI machines)", chk)
	}
	if _, err := exec.LookPath("cpp"); err != nil {
		t.Skip("cpp (the C preprocessor p4c needs) is not installed")
	}
	for _, tc := range []struct {
		prog  string
		flags []string
	}{
		{translatorP4, nil},
		{translatorP4, []string{"-DDTA_ICRC"}},
		{translatorP4, []string{"-DDTA_NO_SEQNUM"}},
		{translatorP4, []string{"-DDTA_NO_SEQNUM", "-DDTA_ICRC"}},
		{reporterP4, nil},
		{reporterP4, []string{"-DDTA_NO_SEQNUM"}},
	} {
		args := append([]string{tc.prog, "--Wwarn"}, tc.flags...)
		out, err := exec.Command(chk, args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s %v: %v\n%s", tc.prog, tc.flags, err, out)
		} else if len(out) > 0 {
			t.Errorf("p4c warns about %s %v:\n%s", tc.prog, tc.flags, out)
		}
	}
}
