package switchemu

import (
	"fmt"
	"strconv"
	"strings"
)

// eosVendor is Arista EOS: ">" and "#" exec modes, "(config...)" modes
// named as EOS names them, configuration sessions ("configure session
// NAME", "commit", "commit timer", "abort", "configure session NAME
// commit|abort" from exec), "% Invalid input" for what no mode knows.
type eosVendor struct{}

func (eosVendor) look() look {
	return look{host: "leaf1", ports: []string{"Ethernet1", "Ethernet2", "Ethernet3", "Ethernet4"}, global: []string{"spanning-tree mode mstp", "ip routing"}, base: "exec>", banner: "Last login: from 127.0.0.1\n",
		unknown: "% Invalid input", bad: "% Invalid input",
		port: []string{"mtu 9214"}}
}

// eosShort is EOS's short interface name in prompts (Ethernet1/2 -> Et1/2).
func eosShort(p string) string { return strings.Replace(p, "Ethernet", "Et", 1) }

func (eosVendor) prompt(sh *modalShell) string {
	t := sh.top()
	switch t.kind {
	case "exec>":
		return sh.host() + ">"
	case "exec":
		return sh.host() + "#"
	}
	label := "config"
	if sh.session != "" {
		label = "config-s-" + sh.session
	}
	for _, m := range sh.modes[2:] {
		label += "-" + m.label
	}
	return sh.host() + "(" + label + ")#"
}

func (v eosVendor) render(st *modalState, root *node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "! Command: show running-config\n! device: %s (cEOSLab, EOS-4.30.1F)\n!\nhostname %s\n", st.o.Hostname, st.o.Hostname)
	// The MMU queue profile's lines are indented by four, the rest by
	// three per level (as EOS prints them).
	indent := func(d int, parent string) string {
		if strings.HasPrefix(parent, "platform trident mmu queue profile") {
			return "    "
		}
		return strings.Repeat(" ", 3*d)
	}
	for _, n := range root.kids {
		b.WriteString("!\n")
		renderTree(&b, []*node{n}, 0, indent, "", "!")
	}
	b.WriteString("!\nend\n")
	return b.String()
}

var eosFractions = map[string]bool{"1/128": true, "1/64": true, "1/32": true, "1/16": true, "1/8": true, "1/4": true, "1/2": true, "1": true, "2": true, "4": true, "8": true}

func (v eosVendor) rules() []rule {
	const anyConfig = "config if txq mmu"
	return []rule{
		r("exec>", `enable`, false, func(sh *modalShell, _ []string) reply {
			sh.modes[0].kind = "exec"
			return reply{}
		}),
		r("exec", `enable`, false, func(*modalShell, []string) reply { return reply{} }),
		r("exec", `disable`, false, func(sh *modalShell, _ []string) reply {
			sh.modes[0].kind = "exec>"
			return reply{}
		}),
		r("exec> exec", `terminal (length|width) \d+`, false, func(sh *modalShell, m []string) reply {
			if m[1] == "length" {
				return out("Pagination disabled.")
			}
			return out("Width set to %s columns.", strings.Fields(m[0])[2])
		}),
		r("exec> exec", `exit|logout`, false, func(*modalShell, []string) reply { return reply{bye: true} }),
		r("exec "+anyConfig, `show running-config`, false, func(sh *modalShell, _ []string) reply {
			return reply{out: v.render(sh.st, sh.st.run)}
		}),
		r("exec", `configure( terminal)?`, false, func(sh *modalShell, _ []string) reply {
			sh.session = ""
			sh.enterConfig("config", sh.st.run)
			return reply{}
		}),
		r("exec", `configure session (\S+)`, false, func(sh *modalShell, m []string) reply {
			if _, ok := sh.st.timers[m[1]]; ok {
				return out("%% Cannot enter session %s (it was committed with a timer)", m[1])
			}
			s, ok := sh.st.sessions[m[1]]
			if !ok {
				s = sh.st.run.clone()
				sh.st.sessions[m[1]] = s
			}
			sh.session = m[1]
			sh.enterConfig("config", s)
			return reply{}
		}),
		r("exec", `configure session (\S+) (commit|abort)`, false, func(sh *modalShell, m []string) reply {
			prev, timed := sh.st.timers[m[1]]
			_, open := sh.st.sessions[m[1]]
			switch {
			case timed && m[2] == "abort":
				sh.st.run = prev
				delete(sh.st.timers, m[1])
			case timed:
				delete(sh.st.timers, m[1])
			case open && m[2] == "abort":
				delete(sh.st.sessions, m[1])
			case open:
				sh.st.run = sh.st.sessions[m[1]]
				delete(sh.st.sessions, m[1])
			default:
				return out("%% Error: session %s does not exist", m[1])
			}
			return reply{}
		}),
		r("exec", `write( memory)?|copy running-config startup-config`, false, func(sh *modalShell, _ []string) reply {
			sh.st.start = sh.st.run.clone()
			return out("Copy completed successfully.")
		}),
		r("config", `commit`, false, func(sh *modalShell, _ []string) reply {
			if sh.session == "" {
				return reply{out: "% Invalid input"}
			}
			sh.st.run = sh.root
			delete(sh.st.sessions, sh.session)
			sh.session = ""
			sh.toBase()
			return reply{}
		}),
		r("config", `commit timer (\d\d):(\d\d):(\d\d)`, false, func(sh *modalShell, _ []string) reply {
			if sh.session == "" {
				return reply{out: "% Invalid input"}
			}
			sh.st.timers[sh.session] = sh.st.run
			sh.st.run = sh.root
			delete(sh.st.sessions, sh.session)
			sh.session = ""
			sh.toBase()
			return reply{}
		}),
		r("config", `abort`, false, func(sh *modalShell, _ []string) reply {
			if sh.session == "" {
				return reply{out: "% Invalid input"}
			}
			delete(sh.st.sessions, sh.session)
			sh.session = ""
			sh.toBase()
			return reply{}
		}),
		r(anyConfig, `end`, false, toBase),
		r(anyConfig, `exit`, false, pop),
		r("config", `interface (Ethernet[0-9/]+)`, true, enterPort(func(p string) string { return "if-" + eosShort(p) }, func(p string) string { return "% Interface " + p + " does not exist" })),
		r("config", `platform trident mmu queue profile (\S+)`, true, func(sh *modalShell, m []string) reply {
			sh.push("mmu", "platform trident mmu queue profile "+m[1], "trident-mmu-queue-profile-"+m[1])
			return reply{}
		}),
		r("config", `platform trident mmu queue profile (\S+) apply`, true, func(sh *modalShell, m []string) reply {
			if sh.root.find("platform trident mmu queue profile "+m[1]) == nil {
				return out("%% Queue profile %s does not exist", m[1])
			}
			sh.set(m[0], "platform trident mmu queue profile apply")
			return reply{}
		}),
		r("mmu", `ingress headroom (bytes|cells) (\d+)`, true, func(sh *modalShell, m []string) reply {
			sh.set(m[0], "ingress headroom")
			return reply{}
		}),
		r("mmu", `ingress priority-group ([0-7]) threshold (\S+)`, true, func(sh *modalShell, m []string) reply {
			if !eosFractions[m[2]] {
				return reply{out: "% Invalid input"}
			}
			sh.set(m[0], "ingress priority-group "+m[1]+" threshold")
			return reply{}
		}),
		r("if", `priority-flow-control on`, true, func(sh *modalShell, m []string) reply {
			sh.set(m[0], "priority-flow-control")
			return reply{}
		}),
		r("if", `priority-flow-control priority ([0-7]) (no-drop|drop)`, true, func(sh *modalShell, m []string) reply {
			sh.set(m[0], "priority-flow-control priority "+m[1])
			return reply{}
		}),
		r("if", `tx-queue ([0-7])`, true, func(sh *modalShell, m []string) reply {
			sh.push("txq", "tx-queue "+m[1], "txq-"+m[1])
			return reply{}
		}),
		r("txq", `random-detect ecn minimum-threshold (\d+) (segments|bytes|kbytes|mbytes) maximum-threshold (\d+) (segments|bytes|kbytes|mbytes)( max-mark-probability (\d+))?( weight (\d+))?`, true,
			func(sh *modalShell, m []string) reply {
				lo, _ := strconv.Atoi(m[1])
				hi, _ := strconv.Atoi(m[3])
				p, _ := strconv.Atoi(m[6])
				if m[2] != m[4] || lo < 1 || hi < lo || hi > 256000000 || (m[6] != "" && (p < 1 || p > 100)) {
					return reply{out: "% Invalid input"}
				}
				sh.set(m[0], "random-detect ecn")
				return reply{}
			}),
	}
}
