package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/service"
)

// startService runs a service on 127.0.0.1:0 until the test ends.
func startService(t *testing.T, name string, check error) string {
	t.Helper()
	s := service.New(name, "127.0.0.1:0", nil)
	s.AddCheck("port loop", func() error { return nil })
	s.AddCheck("collector c1", func() error { return check })
	s.Metrics.Counter("appliance_test_packets_total", "Test packets.").Add(7)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatal(err)
	}
	return s.Addr()
}

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestStatus(t *testing.T) {
	good := startService(t, "dta-translate", nil)
	bad := startService(t, "dta-collect", errors.New("connection to c1 is down"))
	dead := deadAddr(t)

	code, out, errOut := runCLI(t, "status", "--addr", good)
	if code != 0 || !strings.Contains(out, "dta-translate  "+good+"  yes") || !strings.Contains(out, "samples") {
		t.Fatalf("healthy: %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = runCLI(t, "status", "--addr", good, "--addr", "collector="+bad, "--addr", "probe="+dead)
	if code != 1 || !strings.Contains(errOut, "unhealthy or unreachable: "+bad+", "+dead) {
		t.Fatalf("mixed: %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"SERVICE", "HEALTHY", "FAILING",
		"dta-collect    " + bad + "  no",
		"collector c1: connection to c1 is down",
		"probe          " + dead + "  not running",
		"connection refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("%q missing from:\n%s", want, out)
		}
	}

	code, out, _ = runCLI(t, "status", "--json", "--addr", good, "--addr", bad)
	var rows []service.Probed
	if err := json.Unmarshal([]byte(out), &rows); code != 1 || err != nil || len(rows) != 2 {
		t.Fatalf("--json: %d %v %s", code, err, out)
	}
	if r := rows[0]; !r.Running || !r.Healthy || r.Service != "dta-translate" || r.Samples == 0 || r.Families == 0 {
		t.Fatalf("good row %+v", r)
	}
	if r := rows[1]; !r.Running || r.Healthy || len(r.Failing) != 1 || r.Failing[0] != "collector c1" {
		t.Fatalf("bad row %+v", r)
	}
	if code, _, _ := runCLI(t, "status", "--addr", "x="); code != 2 {
		t.Fatalf("empty addr: %d", code)
	}
}

// TestStatusDefaults: with no --addr, services that are not running are shown
// as such and are no error.
func TestStatusDefaults(t *testing.T) {
	old := defaultServices
	t.Cleanup(func() { defaultServices = old })
	defaultServices = []struct{ name, addr string }{{"dump", deadAddr(t)}, {"inject", startService(t, "inject", nil)}}
	code, out, errOut := runCLI(t, "status")
	if code != 0 || !strings.Contains(out, "not running") || !strings.Contains(out, "inject") {
		t.Fatalf("defaults: %d\n%s\n%s", code, out, errOut)
	}
}
