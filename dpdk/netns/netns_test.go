//go:build linux

package netns

import (
	"net"
	"os"
	"testing"
)

func TestPairIsolated(t *testing.T) {
	p := TestPair(t, "nst", 1500)
	for _, c := range []struct{ ns, ifname string }{{p.NSA, p.IfA}, {p.NSB, p.IfB}} {
		err := Do(c.ns, func() error {
			ifc, err := net.InterfaceByName(c.ifname)
			if err != nil {
				return err
			}
			if ifc.MTU != 1500 || ifc.Flags&net.FlagUp == 0 {
				t.Errorf("%s in %s: mtu %d flags %v", c.ifname, c.ns, ifc.MTU, ifc.Flags)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The host does not see the pair.
	if _, err := net.InterfaceByName(p.IfA); err == nil {
		t.Fatal("veth end visible in the host namespace")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + p.NSA); err == nil {
		t.Fatal("namespace left after Close")
	}
	if err := Do("no-such-ns", func() error { return nil }); err == nil {
		t.Fatal("Do in a missing namespace succeeded")
	}
	if _, err := NewPair("toolong", 0); err == nil {
		t.Fatal("long prefix accepted")
	}
}
