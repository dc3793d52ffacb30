package lumina

import (
	"embed"
	"path"
	"sort"
	"strings"
)

// The ready-made tests ship in the binary, so `appliance lumina run
// --ready NAME` and the lab run them wherever the binary is.
//
//go:embed testdata/tests/*.yml
var readyFS embed.FS

// ReadyMade lists the ready-made tests by name (file name without .yml).
func ReadyMade() []string {
	ents, _ := readyFS.ReadDir("testdata/tests")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yml"))
	}
	sort.Strings(out)
	return out
}

// LoadReadyMade loads a ready-made test by name.
func LoadReadyMade(name string) (*Test, error) {
	data, err := readyFS.ReadFile(path.Join("testdata/tests", name+".yml"))
	if err != nil {
		return nil, err
	}
	return DecodeTest("ready:"+name, data)
}
