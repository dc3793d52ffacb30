package tunesim

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestLabRun(t *testing.T) {
	dir := t.TempDir()
	r, err := LabRun(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if !r.Pass || r.Evaluations != LabEvals {
		t.Fatalf("lab run failed: %s", r.Reason)
	}
	for _, f := range []string{"result.json", "convergence.svg", "convergence.png", "watermarks.txt", "lab.json", "state.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
