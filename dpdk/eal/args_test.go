package eal

import (
	"strings"
	"testing"
)

func TestDevargs(t *testing.T) {
	if got := devargs("net_null0", nil); got != "net_null0" {
		t.Fatal(got)
	}
	if got := devargs("net_pcap0", map[string]string{"tx_pcap": "/o.pcap", "rx_pcap": "/i.pcap", "infinite_rx": ""}); got != "net_pcap0,infinite_rx,rx_pcap=/i.pcap,tx_pcap=/o.pcap" {
		t.Fatal(got)
	}
	m := vdevArgs([]string{"-l", "0", "--vdev=net_null0,size=64", "--vdev", "net_ring0", "--vdev"})
	if len(m) != 2 || m["net_null0"] != "net_null0,size=64" || m["net_ring0"] != "net_ring0" {
		t.Fatalf("%q", m)
	}
	if !isVdev("net_af_packet0") || !isVdev("eth_null0") || isVdev("0000:3b:00.0") {
		t.Fatal("isVdev")
	}
}

func TestLazyArgs(t *testing.T) {
	t.Setenv(EnvArgs, "")
	args := strings.Join(lazyArgs("net_ring0,nodeaction=r:0:CREATE"), " ")
	for _, want := range []string{"--no-huge", "--no-pci", "--no-shconf", "-m 256", "--vdev=net_ring0,nodeaction=r:0:CREATE"} {
		if !strings.Contains(args, want) {
			t.Fatalf("%q lacks %q", args, want)
		}
	}
	if pci := strings.Join(lazyArgs("0000:3b:00.0"), " "); strings.Contains(pci, "--vdev") ||
		strings.Contains(pci, "--no-pci") || !strings.HasSuffix(pci, "-a 0000:3b:00.0") {
		t.Fatalf("PCI device: %q", pci)
	}
	t.Setenv(EnvArgs, " -l 3  --in-memory ")
	if got := lazyArgs("net_null0"); !sameArgs(got, []string{"-l", "3", "--in-memory"}) {
		t.Fatalf("%q", got)
	}
}
