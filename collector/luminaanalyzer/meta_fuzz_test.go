package luminaanalyzer

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadMeta: a repeat's meta.json reads or is refused naming the
// file, never a panic.
func FuzzReadMeta(f *testing.F) {
	m := &Meta{Test: "t", Repeat: 1, Trace: TraceFile}
	dir := f.TempDir()
	if err := WriteMeta(dir, m); err == nil {
		if b, err := os.ReadFile(filepath.Join(dir, MetaFile)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"trace":"../../x","conns":[{}],"geometry":{"mtu":-1}}`))
	f.Add([]byte(`{"repeat":1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, MetaFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _ = ReadMeta(dir)
	})
}
