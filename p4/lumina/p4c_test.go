package lumina

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestP4FrontEnd runs p4c's front end (the checker beside the repository,
// ../shared/tools/p4c) on injector.p4; it takes about a second. make test
// runs the same check for every program through p4/check.sh.
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
	out, err := exec.Command(chk, p4Path, "--Wwarn").CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", chk, p4Path, err, out)
	}
	if len(out) > 0 {
		t.Errorf("p4c warns about %s:\n%s", p4Path, out)
	}
}
