package lumina

import (
	"bytes"
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// The injector file of a hardware run is written from the test, as
// Lumina's orchestrator writes its switch config (main.py's
// generate_switch_table_config): the two traffic ports and the two
// mirror ports at their switch-port (a dev port, which Lumina hands to
// pal_port_add), each at the switch's port-speed and fec-type; a route per
// ip-list address to its host's port and NIC MAC (Lumina's forward and
// ARP tables, the MACs read from the hosts); the rewrite port. The
// injector answers the hosts' ARP for each other's addresses with its
// port MAC (proxy ARP) where Lumina's switch answered with the peer's
// MAC: either way each host's frames reach the switch, which forwards
// them to the peer's MAC.

// injectorPortMAC is the switch's own MAC on a traffic port: locally
// administered, unicast, with the dev port in its last two bytes.
func injectorPortMAC(devPort int) string {
	return fmt.Sprintf("02:4c:4d:00:%02x:%02x", devPort>>8&0xff, devPort&0xff)
}

// InjectorSpec builds the injector file of a test. macs holds the NIC
// MAC of the requester and the responder by role, as read from the hosts.
func InjectorSpec(t *Test, mode intent.IterMode, macs map[string]string) inject.Spec {
	s := &t.Spec
	port := func(name, role string, n NICSpec) inject.PortSpec {
		p := inject.PortSpec{Name: name, Role: role, DevPort: n.SwitchPort, Speed: s.Switch.PortSpeed,
			FEC: s.Switch.FECType}
		if role == "traffic" {
			p.MAC = injectorPortMAC(n.SwitchPort)
		} else {
			p.Weight = 1
		}
		return p
	}
	is := inject.Spec{Name: "injector", IterMode: mode.String(), Balance: "wrr", RewriteUDPDstPort: s.RewriteUDPDstPort,
		Ports: []inject.PortSpec{
			port("requester", "traffic", s.Requester.NIC),
			port("responder", "traffic", s.Responder.NIC),
			port("requester_mirror", "mirror", s.RequesterMirror.NIC),
			port("responder_mirror", "mirror", s.ResponderMirror.NIC),
		}}
	for _, h := range []struct {
		role string
		nic  NICSpec
	}{{"requester", s.Requester.NIC}, {"responder", s.Responder.NIC}} {
		for _, a := range h.nic.Addrs() {
			is.Routes = append(is.Routes, inject.RouteSpec{Prefix: netip.PrefixFrom(a, a.BitLen()).String(),
				Port: h.role, MAC: macs[h.role]})
		}
	}
	return is
}

// InjectorFile renders the injector file of a test with the hosts' MACs
// and checks it as the injector will load it: a MAC that did not parse, a
// switch-port used twice or anything else the injector would refuse is an
// error here, before the switch is touched.
func InjectorFile(t *Test, mode intent.IterMode, macs map[string]string) ([]byte, error) {
	for _, role := range []string{"requester", "responder"} {
		if _, err := header.ParseMAC(macs[role]); err != nil {
			return nil, fmt.Errorf("the %s's NIC MAC %q: %w", role, macs[role], err)
		}
	}
	b := renderInjector(t, InjectorSpec(t, mode, macs))
	if _, err := inject.DecodeSpec("injector.yml", b); err != nil {
		return nil, fmt.Errorf("the injector file written from the test: %w", err)
	}
	seen := map[int]string{}
	for _, p := range InjectorSpec(t, mode, macs).Ports {
		if other, dup := seen[p.DevPort]; dup {
			return nil, fmt.Errorf("the injector file written from the test: %s and %s are both on switch-port %d", other, p.Name, p.DevPort)
		}
		seen[p.DevPort] = p.Name
	}
	return b, nil
}

// renderInjector writes the file one port and one route per line, as the
// injector files in the tree are written; every value from the test or a
// host is a quoted scalar.
func renderInjector(t *Test, is inject.Spec) []byte {
	name := "the test"
	if t.Doc != nil {
		name = path.Base(t.Doc.File)
	}
	q := strconv.Quote
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by `appliance lumina run` from %s for `appliance inject tofino`:\n", name)
	b.WriteString("# Lumina's forward, mirror and ARP tables. Removed (or put back) when the run is over.\n")
	fmt.Fprintf(&b, "name: %s\niter-mode: %s\nbalance: %s\nrewrite-udp-dst-port: %d\nports:\n", is.Name, is.IterMode, is.Balance, is.RewriteUDPDstPort)
	for _, p := range is.Ports {
		fmt.Fprintf(&b, "  - {name: %s, role: %s, dev-port: %d, speed: %s, fec: %s", p.Name, p.Role, p.DevPort, q(p.Speed), q(p.FEC))
		if p.MAC != "" {
			fmt.Fprintf(&b, ", mac: %s", q(p.MAC))
		}
		if p.Weight != 0 {
			fmt.Fprintf(&b, ", weight: %d", p.Weight)
		}
		b.WriteString("}\n")
	}
	b.WriteString("routes:\n")
	for _, r := range is.Routes {
		fmt.Fprintf(&b, "  - {prefix: %s, port: %s, mac: %s}\n", r.Prefix, r.Port, q(r.MAC))
	}
	return b.Bytes()
}

// readMACStep reads a host's NIC MAC (Lumina's get_mac_address).
func readMACStep(role string, acc Access, ifName string) Step {
	return Step{Host: role, Access: acc, ID: "mac:" + role, Why: "read " + ifName + "'s MAC for the injector file",
		Argv: []string{"cat", "/sys/class/net/" + ifName + "/address"}}
}

// saveFile prints "present" and the file, or "absent": the state a
// written file is restored to.
const saveFile = `if [ -e "$1" ]; then echo present; cat -- "$1"; else echo absent; fi`

// writeFile writes $2 into the file $1.
const writeFile = `umask 022; printf '%s' "$2" > "$1"`

// injectorFileStep writes the injector file on the switch from the MACs
// the earlier steps read; whatever was at that path comes back after.
func (pl *Plan) injectorFileStep(t *Test, acc Access, file string, mode intent.IterMode) {
	dry := InjectorSpec(t, mode, map[string]string{"requester": "<requester MAC>", "responder": "<responder MAC>"})
	dryYAML := renderInjector(t, dry)
	argv := func(content []byte) []string {
		return []string{"sh", "-c", writeFile, "lumina-write", file, string(content)}
	}
	pl.add(Step{Host: "switch", Access: acc, Why: "write the injector file " + file + " from the test and the MACs read",
		Save:  []string{"sh", "-c", saveFile, "lumina-save", file},
		Argv:  argv(dryYAML),
		Check: checkSavedFile,
		Fill: func(outs map[string][]byte) ([]string, error) {
			macs := map[string]string{}
			for _, role := range []string{"requester", "responder"} {
				macs[role] = strings.TrimSpace(string(outs["mac:"+role]))
			}
			b, err := InjectorFile(t, mode, macs)
			if err != nil {
				return nil, err
			}
			return argv(b), nil
		},
		Restore: func(saved, _ []byte) [][]string {
			if content, ok := strings.CutPrefix(string(saved), "present\n"); ok {
				return [][]string{argv([]byte(content))}
			}
			return [][]string{{"rm", "-f", "--", file}}
		},
		RestoreWhat: "write back what was there, or remove it"})
}

func checkSavedFile(saved []byte) error {
	if s := string(saved); s != "absent\n" && !strings.HasPrefix(s, "present\n") {
		return fmt.Errorf("reading the file before: unexpected output %q", firstLine(s))
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
