package lumina

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"appliance":         "appliance",
		"--nic":             "--nic",
		"ring:x.a":          "ring:x.a",
		`{"intents": []}`:   `'{"intents": []}'`,
		"it's":              `'it'\''s'`,
		"":                  "''",
		"10.0.0.1,10.0.0.2": "10.0.0.1,10.0.0.2",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

// TestSSHFailure: a machine that cannot be reached is an error that says
// which and why, within the connect timeout.
func TestSSHFailure(t *testing.T) {
	if _, err := (SSH{}).Run(context.Background(), Access{}, []string{"true"}); err == nil {
		t.Fatal("no control-ip accepted")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := (SSH{}).Run(ctx, Access{ControlIP: "127.0.0.1", Username: "nobody", SSHKeyFilepath: "/nonexistent/key"},
		[]string{"appliance", "version"})
	if err == nil || !strings.Contains(err.Error(), "ssh nobody@127.0.0.1") {
		t.Fatalf("unreachable host: %v", err)
	}
}
