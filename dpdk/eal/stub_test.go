//go:build !dpdk

package eal

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
)

func TestStub(t *testing.T) {
	pool, err := dpdk.NewPool("stub", 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = dpdk.Open("eal:net_null0", dpdk.Config{Pool: pool})
	if !errors.Is(err, ErrNoDPDK) || !strings.Contains(err.Error(), "built without dpdk: rebuild with -tags dpdk") ||
		!strings.Contains(err.Error(), "net_null0") {
		t.Fatalf("Open: %v", err)
	}
	if err := Init(DefaultArgs()); !errors.Is(err, ErrNoDPDK) {
		t.Fatalf("Init: %v", err)
	}
	if Enabled || Initialized() || Args() != nil {
		t.Fatal("the stub claims DPDK")
	}
}
