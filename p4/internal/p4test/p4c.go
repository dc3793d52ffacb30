package p4test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// FrontEnd runs p4c's front end on the P4 program prog with extra flags
// (such as -DNAME); a warning fails the test as an error does. The
// checker ships beside the repository, in ../shared/tools/p4c, on
// developer and CI machines only (p4/check.sh looks in the same place):
// elsewhere, or without cpp, the test is skipped.
func FrontEnd(t *testing.T, prog string, flags ...string) {
	t.Helper()
	chk, err := checker()
	if err != nil {
		t.Skipf("p4c checker not found: %v", err)
	}
	if _, err := os.Stat(chk); err != nil {
		t.Skipf("p4c checker not found at %s (it ships only beside the repository on dev/CI machines)", chk)
	}
	if _, err := exec.LookPath("cpp"); err != nil {
		t.Skip("cpp (the C preprocessor p4c needs) is not installed")
	}
	args := append([]string{prog, "--Wwarn"}, flags...)
	out, err := exec.Command(chk, args...).CombinedOutput()
	if err != nil {
		t.Errorf("%s %v: %v\n%s", prog, flags, err, out)
	} else if len(out) > 0 {
		t.Errorf("p4c warns about %s %v:\n%s", prog, flags, out)
	}
}

// checker is ../shared/tools/p4c/check.sh beside the module's root (the
// directory holding go.mod), which a test finds from its package's
// directory wherever that is below the root.
func checker() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = up
	}
	return filepath.Join(filepath.Dir(dir), "shared", "tools", "p4c", "check.sh"), nil
}
