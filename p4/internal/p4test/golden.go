package p4test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden scripts in testdata/")

// Golden compares got with testdata/name, or rewrites it with -update.
// On a difference it shows the first line that differs: the scripts are
// long and mostly alike, so a whole diff would bury it.
func Golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		wd, _ := os.Getwd()
		t.Fatalf("%v (run go test ./p4/%s -run %s -update to create it)", err, filepath.Base(wd), t.Name())
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "<none>", "<none>"
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from the golden file at line %d (-update rewrites it):\n got: %s\nwant: %s", path, i+1, g, w)
			}
		}
	}
}
