package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInjectReload: SIGHUP re-reads the injector file: new routes and
// balancing apply to the running injector; a change that needs a restart
// (a port) is refused by name and the injector keeps running as it was.
func TestInjectReload(t *testing.T) {
	id := fmt.Sprintf("hup%d", time.Now().UnixNano()%1e6)
	file := filepath.Join(t.TempDir(), "inj.yml")
	addr := freeAddr(t)
	write := func(respPort, balance string, routes int) {
		y := fmt.Sprintf(`listen: %s
balance: %s
ports:
  - {name: req, role: traffic, port: "ring:%[3]sr.b", addrs: [10.0.0.254]}
  - {name: resp, role: traffic, port: "ring:%[3]s%[4]s.b", addrs: [10.0.1.254]}
  - {name: d0, role: mirror, port: "ring:%[3]sm.a"}
routes:
  - {prefix: 10.0.0.1, port: req, mac: "02:00:00:00:00:01"}
`, addr, balance, id, respPort)
		for i := 1; i < routes; i++ {
			y += fmt.Sprintf("  - {prefix: 10.0.%d.0/24, port: resp, mac: \"02:00:00:00:00:02\"}\n", i)
		}
		if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("s", "wrr", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer // the service's logger and the test share them
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"inject", "run", "-f", file}, &out, &errOut) }()
	wait := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(errOut.String(), what); {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in %s", what, errOut.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("listening")
	write("s", "flow-hash", 3)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait("configuration reloaded")
	if !strings.Contains(errOut.String(), "routes=3 balance=flow-hash") {
		t.Fatalf("reload: %s", errOut.String())
	}
	write("x", "wrr", 1)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait("configuration not reloaded")
	if !strings.Contains(errOut.String(), "ports[1] (resp) changed: restart the injector") {
		t.Fatalf("refused reload: %s", errOut.String())
	}
	// Both outcomes are counted for the operator's dashboard.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`appliance_inject_config_reloads_total{result="ok"} 1`, `appliance_inject_config_reloads_total{result="refused"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}
