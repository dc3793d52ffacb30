package switchemu

import (
	"strconv"
	"strings"
)

// comwareVendor is H3C Comware 7: "<HOST>" user view, "[HOST]" system view,
// "[HOST-wred-table-NAME]", "[HOST-HundredGigE1/0/1]"; changes apply at
// once; "save FILE" and "configuration replace file FILE" with their
// confirmations, "delete /unreserved"; "% Unrecognized command found at
// '^' position." for what no view knows.
type comwareVendor struct{}

func (comwareVendor) look() look {
	return look{host: "H3C", ports: []string{"HundredGigE1/0/1", "HundredGigE1/0/2", "HundredGigE1/0/3", "HundredGigE1/0/4"}, global: []string{"lldp global enable"}, base: "user", banner: "******************************************************************************\n* Copyright (c) 2004-2023 New H3C Technologies Co., Ltd. All rights reserved.*\n******************************************************************************\n",
		unknown: "                  ^\n % Unrecognized command found at '^' position.", bad: "                  ^\n % Wrong parameter found at '^' position.",
		port: []string{"port link-mode bridge"}}
}

func (comwareVendor) prompt(sh *modalShell) string {
	t := sh.top()
	if t.kind == "user" {
		return "<" + sh.host() + ">"
	}
	return "[" + sh.host() + t.label + "]"
}

// render writes Comware's layout: "#" between sections, one-line
// settings indented by one, sections at the margin with their lines
// under them.
func (comwareVendor) render(st *modalState, root *node) string {
	var b strings.Builder
	b.WriteString("#\n version 7.1.070, Release 6710\n#\n sysname " + st.o.Hostname + "\n")
	for _, n := range root.kids {
		b.WriteString("#\n")
		if len(n.kids) == 0 {
			b.WriteString(" " + n.line + "\n")
			continue
		}
		renderTree(&b, []*node{n}, 0, spaces(1), "", "")
	}
	b.WriteString("#\nreturn\n")
	return b.String()
}

func (v comwareVendor) rules() []rule {
	const views = "system table if"
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	set := func(key func(m []string) string) func(sh *modalShell, m []string) reply {
		return func(sh *modalShell, m []string) reply {
			sh.set(m[0], key(m))
			return reply{}
		}
	}
	saved := "Validating file. Please wait...\nSaved the current configuration to mainboard device successfully."
	return []rule{
		r("user", `screen-length disable`, false, func(*modalShell, []string) reply { return reply{} }),
		r("user", `quit`, false, func(*modalShell, []string) reply { return reply{bye: true} }),
		r("user "+views, `display current-configuration`, false, func(sh *modalShell, _ []string) reply {
			return reply{out: v.render(sh.st, sh.st.run)}
		}),
		r("user", `system-view`, false, func(sh *modalShell, _ []string) reply {
			sh.enterConfig("system", sh.st.run)
			return out("System View: return to User View with Ctrl+Z.")
		}),
		r("user", `save force`, false, func(sh *modalShell, _ []string) reply {
			sh.st.start = sh.st.run.clone()
			return out("%s", saved)
		}),
		r("user", `save (flash:/[\w.\-]+\.cfg)`, false, func(sh *modalShell, m []string) reply {
			return reply{ask: "The current configuration will be saved to " + m[1] + ". Continue? [Y/N]:",
				then: func(a string) reply {
					if strings.ToUpper(a) != "Y" {
						return out("Configuration is not saved.")
					}
					sh.st.files[m[1]] = sh.st.run.clone()
					return out("%s", saved)
				}}
		}),
		r("user", `delete /unreserved (flash:/[\w.\-]+)`, false, func(sh *modalShell, m []string) reply {
			if _, ok := sh.st.files[m[1]]; !ok {
				return out("Error: %s does not exist.", m[1])
			}
			return reply{ask: "The file cannot be restored. Delete " + m[1] + "? [Y/N]:",
				then: func(a string) reply {
					if strings.ToUpper(a) != "Y" {
						return reply{}
					}
					delete(sh.st.files, m[1])
					return out("Deleting the file permanently will take a long time. Please wait...\nDeleted file %s.", m[1])
				}}
		}),
		r(views, `return`, false, toBase),
		r(views, `quit`, false, pop),
		r("system", `configuration replace file (flash:/[\w.\-]+)`, false, func(sh *modalShell, m []string) reply {
			f, ok := sh.st.files[m[1]]
			if !ok {
				return out("The file %s does not exist.", m[1])
			}
			return reply{ask: "Current configuration will be lost, save current configuration? [Y/N]:",
				then: func(a string) reply {
					if strings.ToUpper(a) == "Y" {
						sh.st.start = sh.st.run.clone()
					}
					sh.st.run = f.clone()
					sh.enterConfig("system", sh.st.run)
					return out("Now replacing the current configuration. Please wait...\nSucceeded in replacing current configuration with the file %s.", m[1])
				}}
		}),
		r("system", `qos wred queue table (\S+)`, true, func(sh *modalShell, m []string) reply {
			sh.push("table", m[0], "-wred-table-"+m[1])
			return reply{}
		}),
		r("system", `interface (\S+)`, true, enterPort(func(p string) string { return "-" + p }, func(string) string { return v.look().bad })),
		r("table", `queue ([0-7]) drop-level ([0-2]) low-limit (\d+) high-limit (\d+) discard-probability (\d+)`, true, func(sh *modalShell, m []string) reply {
			lo, hi, p := num(m[3]), num(m[4]), num(m[5])
			if hi > 16000 || lo > hi || p > 100 {
				return reply{out: v.look().bad}
			}
			sh.set(m[0], "queue "+m[1]+" drop-level "+m[2])
			return reply{}
		}),
		r("table", `queue ([0-7]) ecn`, true, set(func(m []string) string { return m[0] })),
		r("if", `qos wred apply (\S+)`, true, func(sh *modalShell, m []string) reply {
			if sh.root.find("qos wred queue table "+m[1]) == nil {
				return out("The WRED table %s does not exist.\n %% Wrong parameter found at '^' position.", m[1])
			}
			sh.set(m[0], "qos wred apply")
			return reply{}
		}),
		r("if", `priority-flow-control (enable|auto)`, true, set(func([]string) string { return "pfc mode" })),
		r("if", `priority-flow-control no-drop dot1p ([0-7](,[0-7])*)`, true, set(func([]string) string { return "pfc no-drop" })),
		r("if", `priority-flow-control dot1p ([0-7]) headroom (\d+)`, true, set(func(m []string) string { return "pfc headroom " + m[1] })),
		r("if", `priority-flow-control dot1p ([0-7]) ingress-buffer (dynamic|static) (\d+)`, true, set(func(m []string) string { return "pfc ingress-buffer " + m[1] })),
	}
}
