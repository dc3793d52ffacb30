package tuning

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// treeRunning is a running configuration that shows every wanted line,
// each under its section headers, indented as the vendors' CLIs print.
func treeRunning(wants []want) string {
	var b strings.Builder
	for _, w := range wants {
		for i, h := range w.path {
			b.WriteString(strings.Repeat("   ", i) + h + "\n")
		}
		b.WriteString(strings.Repeat("   ", len(w.path)) + w.line + "\n!\n")
	}
	return b.String()
}

// FuzzVerifyRunning: a switch's running configuration (its CLI's output)
// is verified against the golden intents of every dialect without a
// panic; canon is idempotent (a rollback's before and after compare
// equal when nothing changed), and for the indented dialects verifying
// the canonical form agrees with verifying the original.
func FuzzVerifyRunning(f *testing.F) {
	for _, name := range DialectNames() {
		if b, err := os.ReadFile(filepath.Join("testdata", "dialect-"+name+".txt")); err == nil {
			f.Add(string(b))
		}
	}
	for _, name := range DialectNames() {
		d := Dialects()[name]
		tree, ok := d.(interface{ wants([]Intent) []want })
		if !ok {
			continue
		}
		running := treeRunning(tree.wants([]Intent{goldenIntent(name)}))
		if err := d.verify(running, []Intent{goldenIntent(name)}); err != nil {
			f.Fatalf("%s: a running configuration with every wanted line: %v", name, err)
		}
		f.Add(running)
	}
	f.Add("show runningconfiguration all\n{\"BUFFER_PG\": {\"Ethernet0|3\": {\"profile\": \"x\"}}, \"n\": 1e400}")
	f.Add("interface Ethernet1\n\t tx-queue 3\n  ! comment\n   random-detect ecn\n#\n")
	f.Fuzz(func(t *testing.T, running string) {
		for _, name := range DialectNames() {
			d := Dialects()[name]
			in := goldenIntent(name)
			err := d.verify(running, []Intent{in})
			c := d.canon(running)
			if cc := d.canon(c); cc != c {
				t.Fatalf("%s: canon not idempotent:\n%q\n%q", name, c, cc)
			}
			if name == "sonic" {
				continue
			}
			if err2 := d.verify(c, []Intent{in}); (err == nil) != (err2 == nil) {
				t.Fatalf("%s: verify %v, of the canonical form %v", name, err, err2)
			}
		}
	})
}
