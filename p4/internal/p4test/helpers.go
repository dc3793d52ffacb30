package p4test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

// ExpectBad checks that err is a validation error (wrapping sentinel, the
// package's ErrProgram) naming field: "bad program: <field>:" in the
// message. A field ending in ':' names the field exactly, so that "ports:"
// is not satisfied by "ports[0].name".
func ExpectBad(t *testing.T, sentinel error, field string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", field)
		return
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: %v does not wrap %v", field, err, sentinel)
	}
	if want := "bad program: " + strings.TrimSuffix(field, ":") + ":"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, field)
	}
}

// MAC parses a MAC address or fails the test.
func MAC(t testing.TB, s string) header.MAC {
	t.Helper()
	m, err := header.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
