package cli

import (
	"net"
	"strings"
	"testing"
)

// TestLabServeFlags: --services wants --serve and NAME=ADDR pairs, and a
// --serve address that cannot be listened on fails before any stage runs.
func TestLabServeFlags(t *testing.T) {
	if code, _, errOut := runCLI(t, "lab", "--services", "c=127.0.0.1:9300"); code != 2 || !strings.Contains(errOut, "--services needs --serve") {
		t.Fatalf("--services alone: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "lab", "--serve", "127.0.0.1:0", "--services", "c="); code != 2 || !strings.Contains(errOut, "NAME=HOST:PORT") {
		t.Fatalf("--services c=: %d %s", code, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, out, errOut := runCLI(t, "lab", "--out", t.TempDir(), "--serve", ln.Addr().String())
	if code != 1 || !strings.Contains(errOut, "listen") || strings.Contains(out+errOut, "lab: wire: running") {
		t.Fatalf("taken address: %d %s %s", code, out, errOut)
	}
	targets, err := parseTargets(" a=h:1, h:2 ,")
	if err != nil || len(targets) != 2 || targets[0].Name != "a" || targets[1].Name != "h:2" || targets[1].Addr != "h:2" {
		t.Fatalf("%+v %v", targets, err)
	}
}
