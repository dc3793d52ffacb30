package dtamem

import (
	"net/netip"
	"strings"
	"testing"
)

// TestOfferEndpoint: the collector's end of a connection is a unicast host
// with a 24-bit QPN; an offer naming a multicast, broadcast, loopback or
// unspecified address is refused before anyone writes to it.
func TestOfferEndpoint(t *testing.T) {
	good := Offer{Name: "c0", IP: netip.MustParseAddr("10.9.0.1"), MAC: "02:00:00:00:00:09", QPN: 0x11}
	ep, err := good.Endpoint()
	if err != nil || ep.QPN != 0x11 || ep.MAC[5] != 9 || ep.GID.Addr() != good.IP {
		t.Fatalf("%+v, %v", ep, err)
	}
	for _, ip := range []string{"224.0.0.9", "255.255.255.255", "127.0.0.1", "0.0.0.0", "ff02::1", "::1"} {
		o := good
		o.IP = netip.MustParseAddr(ip)
		if _, err := o.Endpoint(); err == nil || !strings.Contains(err.Error(), "address "+ip+" is not a unicast host") {
			t.Errorf("%s: %v", ip, err)
		}
	}
	o := good
	o.QPN = 1 << 24
	if _, err := o.Endpoint(); err == nil {
		t.Error("a QPN over 24 bits: want an error")
	}
}
