package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/bench/perftest"
	"github.com/rdma-appliance/appliance/dpdk/netns"
)

// TestMain lets tests run the CLI as a separate process: the test binary
// re-executed with APPLIANCE_CLI_EXEC=1 is the appliance binary.
func TestMain(m *testing.M) {
	if os.Getenv("APPLIANCE_CLI_EXEC") == "1" {
		os.Exit(Run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestPerfLoopback(t *testing.T) {
	code, out, errOut := runCLI(t, "verbs", "write", "--loopback", "-n", "300", "-s", "4096")
	if code != 0 || !strings.Contains(out, "RDMA_Write BW Test") || !strings.Contains(out, "BW average[MB/sec]") {
		t.Fatalf("write: %d\n%s%s", code, out, errOut)
	}
	// The server's name may come before the flags, as perftest takes it.
	code, out, errOut = runCLI(t, "verbs", "read", "--loopback", "--lat", "-n", "100", "--json")
	var res map[string][]perftest.Result
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res["client"]) != 1 || res["client"][0].Lat == nil {
		t.Fatalf("read --lat --json: %d\n%s%s", code, out, errOut)
	}
}

func TestPerfUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"verbs", "write"},                             // no device
		{"verbs", "write", "--loopback", "10.0.0.1"},   // loopback and a server
		{"verbs", "write", "--loopback", "-m", "1500"}, // bad MTU
		{"verbs", "atomic", "--loopback", "-A", "XOR"}, // bad atomic
		{"verbs", "send", "--loopback", "-n", "2"},     // too few iterations
		{"verbs", "write", "--nic", "ring:x.a"},        // soft RNIC without a GID
		{"verbs", "write", "-d", "x", "--nic", "ring:x.a"},
		{"verbs", "write", "host", "extra"},
		{"verbs", "read", "--loopback", "--cores", "0"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\n%s", args, code, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "verbs", "write", "-d", "nosuchdev0"); code != 1 || !strings.Contains(errOut, "nosuchdev0") {
		t.Errorf("unknown device: %d %s", code, errOut)
	}
}

// TestPerfTwoProcesses runs perftest the way engineers do across two hosts:
// a server and a client process, each with a software RNIC on an AF_PACKET
// port, in two network namespaces joined by a veth pair; the out-of-band
// exchange goes over the kernel's TCP on the same link.
func TestPerfTwoProcesses(t *testing.T) {
	v := netns.TestPair(t, "pft", 0)
	for i, ns := range []string{v.NSA, v.NSB} {
		ifc := []string{v.IfA, v.IfB}[i]
		if err := netns.IP("-n", ns, "addr", "add", fmt.Sprintf("10.77.0.%d/24", i+1), "dev", ifc); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range [][]string{
		{"write", "-n", "2000", "-s", "8192"},
		{"send", "--lat", "-n", "200"},
		{"atomic", "-n", "500"},
	} {
		t.Run(tc[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			side := func(ns, ifc, gid string, extra ...string) *exec.Cmd {
				args := append([]string{"netns", "exec", ns, os.Args[0], "verbs"}, tc...)
				args = append(args, "--nic", "afpacket:"+ifc+",timeout=1", "--gid", gid, "-p", "18600")
				cmd := exec.CommandContext(ctx, "ip", append(args, extra...)...)
				cmd.Env = append(os.Environ(), "APPLIANCE_CLI_EXEC=1")
				return cmd
			}
			// The server listens on loopback unless told.
			srv := side(v.NSA, v.IfA, "10.77.1.1", "--bind", "10.77.0.1")
			var sout, serr bytes.Buffer
			srv.Stdout, srv.Stderr = &sout, &serr
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			cli := side(v.NSB, v.IfB, "10.77.1.2", "--json", "10.77.0.1")
			out, cerr := cli.Output()
			serrWait := srv.Wait()
			if cerr != nil || serrWait != nil {
				var stderr string
				if ee, ok := cerr.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("client: %v\n%s%s\nserver: %v\n%s%s", cerr, out, stderr, serrWait, sout.String(), serr.String())
			}
			var res []perftest.Result
			if err := json.Unmarshal(out, &res); err != nil || len(res) != 1 {
				t.Fatalf("client output %q: %v", out, err)
			}
			if r := res[0]; r.AvgBps <= 0 && r.Lat == nil {
				t.Fatalf("client result %+v", r)
			}
			if !strings.Contains(sout.String(), "remote address: LID") {
				t.Errorf("server report:\n%s", sout.String())
			}
			t.Logf("%s: %+v", tc[0], res[0])
		})
	}
}
