package switchemu

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// nxosVendor is Cisco NX-OS on a Nexus 9000: "#" exec, "(config-pmap-nqos)",
// "(config-pmap-nqos-c)", "(config-pmap-que)", "(config-pmap-c-que)",
// "(config-sys-qos)", "(config-if)"; checkpoints and "rollback
// running-config checkpoint"; "% Invalid command at '^' marker." for what
// no mode knows.
type nxosVendor struct{}

func (nxosVendor) look() look {
	return look{host: "n9k-leaf1", ports: []string{"Ethernet1/1", "Ethernet1/2", "Ethernet1/3", "Ethernet1/4"}, global: []string{"feature lldp"}, base: "exec", banner: "Cisco NX-OS Software\nCopyright (c) 2002-2023, Cisco Systems, Inc. All rights reserved.\n",
		unknown: "                  ^\n% Invalid command at '^' marker.", bad: "                  ^\n% Invalid command at '^' marker.",
		port: []string{"mtu 9216", "no shutdown"}}
}

var nxosLabels = map[string]string{"config": "config", "pmap-nqos": "config-pmap-nqos", "pmap-c-nqos": "config-pmap-nqos-c",
	"pmap-que": "config-pmap-que", "pmap-c-que": "config-pmap-c-que", "sys-qos": "config-sys-qos", "if": "config-if"}

func (nxosVendor) prompt(sh *modalShell) string {
	t := sh.top()
	if t.kind == "exec" {
		return sh.host() + "#"
	}
	return sh.host() + "(" + nxosLabels[t.kind] + ")#"
}

func (nxosVendor) render(st *modalState, root *node) string {
	var b strings.Builder
	now := time.Now().Format("Mon Jan 2 15:04:05 2006")
	fmt.Fprintf(&b, "!Command: show running-config\n!Running configuration last done at: %s\n!Time: %s\n\nversion 10.3(2) Bios:version 05.47\nhostname %s\n", now, now, st.o.Hostname)
	for _, n := range root.kids {
		b.WriteString("\n")
		renderTree(&b, []*node{n}, 0, spaces(2), "", "")
	}
	return b.String()
}

// policy is whether the queuing or network-qos policy exists.
func (sh *modalShell) policy(kind, name string) bool {
	return sh.root.find("policy-map type "+kind+" "+name) != nil
}

func (v nxosVendor) rules() []rule {
	const anyConfig = "config pmap-nqos pmap-c-nqos pmap-que pmap-c-que sys-qos if"
	done := func(*modalShell, []string) reply { return reply{} }
	setKey := func(key func(m []string) string) func(sh *modalShell, m []string) reply {
		return func(sh *modalShell, m []string) reply {
			sh.set(m[0], key(m))
			return reply{}
		}
	}
	return []rule{
		r("exec", `terminal (length|width) \d+`, false, done),
		r("exec", `exit`, false, func(*modalShell, []string) reply { return reply{bye: true} }),
		r("exec "+anyConfig, `show running-config`, false, func(sh *modalShell, _ []string) reply {
			return reply{out: v.render(sh.st, sh.st.run)}
		}),
		r("exec", `configure( terminal)?`, false, func(sh *modalShell, _ []string) reply {
			sh.enterConfig("config", sh.st.run)
			return out("Enter configuration commands, one per line. End with CNTL/Z.")
		}),
		r("exec", `checkpoint (\S+)`, false, func(sh *modalShell, m []string) reply {
			if _, ok := sh.st.checkpoints[m[1]]; ok {
				return out("ERROR: Checkpoint name %s is already in use", m[1])
			}
			sh.st.checkpoints[m[1]] = sh.st.run.clone()
			return out("...........\nDone")
		}),
		r("exec", `no checkpoint (\S+)`, false, func(sh *modalShell, m []string) reply {
			if _, ok := sh.st.checkpoints[m[1]]; !ok {
				return out("ERROR: No checkpoint with name %s", m[1])
			}
			delete(sh.st.checkpoints, m[1])
			return reply{}
		}),
		r("exec", `rollback running-config checkpoint (\S+)( atomic)?`, false, func(sh *modalShell, m []string) reply {
			c, ok := sh.st.checkpoints[m[1]]
			if !ok {
				return out("ERROR: No checkpoint with name %s", m[1])
			}
			sh.st.run = c.clone()
			return out("Note: Applying config parallelly may fail Rollback verification\nCollecting Running-Config\n#Generating Rollback Patch\nExecuting Rollback Patch\n#Generating Running-config for verification\n#Generating Patch for verification\nVerification is Successful.\n\nRollback completed successfully.")
		}),
		r("exec", `copy running-config startup-config`, false, func(sh *modalShell, _ []string) reply {
			sh.st.start = sh.st.run.clone()
			return out("[########################################] 100%%\nCopy complete, now saving to disk (please wait)...\nCopy complete.")
		}),
		r(anyConfig, `end`, false, toBase),
		r(anyConfig, `exit`, false, pop),
		r("config", `policy-map type network-qos (\S+)`, true, func(sh *modalShell, m []string) reply {
			sh.push("pmap-nqos", m[0], "")
			return reply{}
		}),
		r("config", `policy-map type queuing (\S+)`, true, func(sh *modalShell, m []string) reply {
			sh.push("pmap-que", m[0], "")
			return reply{}
		}),
		r("config", `system qos`, true, func(sh *modalShell, m []string) reply {
			sh.push("sys-qos", m[0], "")
			return reply{}
		}),
		r("config", `interface (\S+)`, true, enterPort(func(string) string { return "" }, func(p string) string { return "ERROR: Invalid interface " + p })),
		r("pmap-nqos", `class type network-qos (c-8q-nq[0-7]|c-8q-nq-default)`, true, func(sh *modalShell, m []string) reply {
			sh.push("pmap-c-nqos", m[0], "")
			return reply{}
		}),
		r("pmap-c-nqos", `pause pfc-cos [0-7](,[0-7])*`, true, setKey(func([]string) string { return "pause" })),
		r("pmap-c-nqos", `mtu \d+`, true, setKey(func([]string) string { return "mtu" })),
		r("pmap-que", `class type queuing (c-out-8q-q[0-7]|c-out-8q-q-default|c-in-q[0-7]|c-in-q-default)`, true, func(sh *modalShell, m []string) reply {
			sh.push("pmap-c-que", m[0], "")
			return reply{}
		}),
		r("pmap-c-que", `random-detect minimum-threshold (\d+) (bytes|kbytes|mbytes) maximum-threshold (\d+) (bytes|kbytes|mbytes) drop-probability (\d+) weight (\d+)( ecn)?`, true,
			func(sh *modalShell, m []string) reply {
				lo, _ := strconv.Atoi(m[1])
				hi, _ := strconv.Atoi(m[3])
				p, _ := strconv.Atoi(m[5])
				// WRED is an egress queue's; the ingress classes take pause buffers.
				if !strings.Contains(sh.top().node.line, "c-out-") || m[2] != m[4] || hi < lo || p > 100 {
					return reply{out: v.look().bad}
				}
				sh.set(m[0], "random-detect")
				return reply{}
			}),
		r("pmap-c-que", `pause buffer-size (\d+) pause-threshold (\d+) resume-threshold (\d+)`, true, func(sh *modalShell, m []string) reply {
			size, _ := strconv.Atoi(m[1])
			pause, _ := strconv.Atoi(m[2])
			resume, _ := strconv.Atoi(m[3])
			if !strings.Contains(sh.top().node.line, "c-in-") || pause > size || resume > pause {
				return reply{out: v.look().bad}
			}
			sh.set(m[0], "pause")
			return reply{}
		}),
		r("sys-qos", `service-policy type (network-qos|queuing input|queuing output) (\S+)`, true, func(sh *modalShell, m []string) reply {
			if !sh.policy(strings.Fields(m[1])[0], m[2]) {
				return out("ERROR: policy-map %s does not exist", m[2])
			}
			sh.set(m[0], "service-policy type "+m[1])
			return reply{}
		}),
		r("if", `priority-flow-control mode (on|off|auto)`, true, setKey(func([]string) string { return "priority-flow-control mode" })),
		r("if", `service-policy type queuing (input|output) (\S+)`, true, func(sh *modalShell, m []string) reply {
			if !sh.policy("queuing", m[2]) {
				return out("ERROR: policy-map %s does not exist", m[2])
			}
			sh.set(m[0], "service-policy type queuing "+m[1])
			return reply{}
		}),
	}
}
