package lumina

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPaperReport writes two of the paper's pages (the cheap ones: Tables
// 3 and 4 share three runs) and the index: each page holds the paper's and
// the twin's figures with a verdict per check, Table 3's first marks as
// the misses they are, and the index links every page with its count.
// The runs' directories are gone (the pages need none of them).
func TestPaperReport(t *testing.T) {
	out := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	pages, err := PaperReport(context.Background(), out, PaperOptions{Figures: []string{"cnpcheck", "table4", "table3"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 3 || pages[2].Name != "cnpcheck" || pages[2].Misses() != 0 || len(pages[2].Checks) != 8 {
		t.Fatalf("cnpcheck page %+v", pages[len(pages)-1])
	}
	pages = pages[:2]
	for _, dir := range []string{out, tmp} {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if e.IsDir() {
				t.Errorf("%s left behind in %s", e.Name(), dir)
			}
		}
	}
	if len(pages) != 2 || pages[0].Name != "table3" || pages[1].Name != "table4" {
		t.Fatalf("pages %+v, want table3 then table4 (the paper's order)", pages)
	}
	if m := pages[1].Misses(); m != 0 || len(pages[1].Checks) != 3 {
		t.Errorf("table4: %d checks, %d missed: %+v", len(pages[1].Checks), m, pages[1].Checks)
	}
	missed := map[string]bool{}
	for _, c := range pages[0].Checks {
		if !c.OK {
			missed[c.What] = true
		}
	}
	for _, c := range pages[0].Checks {
		if strings.Contains(c.What, "2nd mark") && !c.OK {
			t.Errorf("table3: %+v missed", c)
		}
	}
	if !missed["CX5 QP1 1st mark"] || !missed["CX4 QP1 1st mark"] {
		t.Errorf("table3: the first marks the twin does not reproduce are not shown as misses: %v", missed)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t4 := read("table4.html")
	for _, want := range []string{"Table 4: CNPs per QP", "[2 0 0]", "per port", "within", `href="index.html"`} {
		if !strings.Contains(t4, want) {
			t.Errorf("table4.html lacks %q", want)
		}
	}
	if t3 := read("table3.html"); !strings.Contains(t3, "MISSED") || !strings.Contains(t3, "616") {
		t.Error("table3.html does not show the paper's marks and its misses")
	}
	idx := read("index.html")
	for _, want := range []string{`href="table3.html"`, `href="table4.html"`, "3 of 3 checks within tolerance",
		fmt.Sprintf("checks within tolerance, %d missed", pages[0].Misses())} {
		if !strings.Contains(idx, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if _, err := PaperReport(context.Background(), out, PaperOptions{Figures: []string{"fig99"}}); err == nil {
		t.Error("an unknown figure accepted")
	}
}
