package switchemu

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// vrpVendor is Huawei VRP V8 on a CloudEngine in two-phase validation:
// "<HOST>" user view, "[~HOST]" system view with nothing uncommitted and
// "[*HOST]" with candidate changes (or an unconfirmed trial), views named
// "[~HOST-100GE1/0/1]", "[~HOST-drop-profile-NAME]"; "commit", "commit
// trial", "abort trial", "clear configuration candidate"; "Error:
// Unrecognized command found at '^' position." for what no view knows.
type vrpVendor struct{}

func (vrpVendor) look() look {
	return look{host: "HUAWEI", ports: []string{"100GE1/0/1", "100GE1/0/2", "100GE1/0/3", "100GE1/0/4"}, global: []string{}, base: "user", banner: "Info: The max number of VTY users is 21, the number of current VTY users online is 1.\n",
		unknown: "              ^\nError: Unrecognized command found at '^' position.", bad: "              ^\nError: Wrong parameter found at '^' position.",
		port: []string{"description to-server"}}
}

func (v vrpVendor) prompt(sh *modalShell) string {
	t := sh.top()
	if t.kind == "user" {
		return "<" + sh.host() + ">"
	}
	mark := "~"
	if sh.dirty() || sh.st.trial != nil {
		mark = "*"
	}
	return "[" + mark + sh.host() + t.label + "]"
}

// dirty says the candidate holds changes not committed.
func (sh *modalShell) dirty() bool {
	return sh.root != nil && treeText(sh.root) != treeText(sh.st.run)
}

func (vrpVendor) render(st *modalState, root *node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "!Software Version V300R022C00SPC500\n!Last configuration was updated at %s\n#\nsysname %s\n",
		time.Now().Format("2006-01-02 15:04:05+00:00"), st.o.Hostname)
	for _, n := range root.kids {
		b.WriteString("#\n")
		renderTree(&b, []*node{n}, 0, spaces(1), "", "")
	}
	b.WriteString("#\nreturn\n")
	return b.String()
}

func (v vrpVendor) rules() []rule {
	const views = "system dp dcbpfc if"
	leave := func(sh *modalShell, then func()) reply {
		if !sh.dirty() {
			then()
			return reply{}
		}
		return reply{ask: "Warning: Uncommitted configurations found. Are you sure to commit them before exiting? [Y(yes)/N(no)/C(cancel)]:",
			then: func(a string) reply {
				switch strings.ToUpper(a) {
				case "Y":
					sh.st.run = sh.root.clone()
				case "N":
					sh.root = sh.st.run.clone()
				default:
					return reply{}
				}
				then()
				return reply{}
			}}
	}
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	return []rule{
		r("user", `screen-length 0 temporary`, false, func(*modalShell, []string) reply {
			return out("Info: The configuration takes effect on the current user terminal interface only.")
		}),
		r("user", `quit`, false, func(*modalShell, []string) reply { return reply{bye: true} }),
		r("user "+views, `display current-configuration`, false, func(sh *modalShell, _ []string) reply {
			return reply{out: v.render(sh.st, sh.st.run)}
		}),
		r("user", `system-view`, false, func(sh *modalShell, _ []string) reply {
			if sh.root == nil || !sh.dirty() {
				sh.root = sh.st.run.clone()
			}
			sh.enterConfig("system", sh.root)
			return out("Enter system view, return user view with return command.")
		}),
		r("user", `save`, false, func(sh *modalShell, _ []string) reply {
			return reply{ask: "Warning: The current configuration will be written to the device. Continue? [Y/N]:",
				then: func(a string) reply {
					if strings.ToUpper(a) != "Y" {
						return out("Info: Save canceled.")
					}
					sh.st.start = sh.st.run.clone()
					return out("Now saving the current configuration to the slot 1\nInfo: Save the configuration successfully.")
				}}
		}),
		r(views, `return`, false, func(sh *modalShell, _ []string) reply { return leave(sh, sh.toBase) }),
		r("dp dcbpfc if", `quit`, false, pop),
		r("system", `quit`, false, func(sh *modalShell, _ []string) reply { return leave(sh, sh.toBase) }),
		r(views, `commit`, false, func(sh *modalShell, _ []string) reply {
			if !sh.dirty() && sh.st.trial != nil {
				sh.st.trial = nil // confirms the trial
				return reply{}
			}
			sh.st.run = sh.root.clone()
			return reply{}
		}),
		r(views, `commit trial (\d+)`, false, func(sh *modalShell, m []string) reply {
			if n := num(m[1]); n < 60 || n > 65535 {
				return reply{out: v.look().bad}
			}
			if !sh.dirty() {
				return out("Error: No configuration to be committed.")
			}
			sh.st.trial = sh.st.run
			sh.st.run = sh.root.clone()
			return out("Committing..done.\nInfo: The system enters the trial configuration mode. The system will revert to previous configuration if the trial configuration is not confirmed in %s seconds.", m[1])
		}),
		r(views, `abort trial`, false, func(sh *modalShell, _ []string) reply {
			if sh.st.trial == nil {
				return out("Error: The system is not in trial configuration mode.")
			}
			sh.st.run, sh.st.trial = sh.st.trial, nil
			sh.enterConfig("system", sh.st.run.clone())
			return out("Warning: The trial configuration will be aborted and the system will roll back to the configuration before the trial.\nInfo: Succeeded in aborting the trial configuration.")
		}),
		r(views, `clear configuration candidate`, false, func(sh *modalShell, _ []string) reply {
			sh.enterConfig("system", sh.st.run.clone())
			return reply{}
		}),
		r("system", `drop-profile (\S+)`, true, func(sh *modalShell, m []string) reply {
			sh.push("dp", m[0], "-drop-profile-"+m[1])
			return reply{}
		}),
		r("system", `dcb pfc`, true, func(sh *modalShell, m []string) reply {
			sh.push("dcbpfc", m[0], "-dcb-pfc-default")
			return reply{}
		}),
		r("system", `interface (\S+)`, true, enterPort(func(p string) string { return "-" + p }, func(string) string { return v.look().bad })),
		r("dp", `color (green|yellow|red) low-limit (\d+) high-limit (\d+) discard-percentage (\d+)`, true, func(sh *modalShell, m []string) reply {
			lo, hi, p := num(m[2]), num(m[3]), num(m[4])
			if hi > 100 || lo > hi || p < 1 || p > 100 {
				return reply{out: v.look().bad}
			}
			sh.set(m[0], "color "+m[1])
			return reply{}
		}),
		r("dcbpfc", `priority ([0-7])`, true, func(sh *modalShell, m []string) reply {
			sh.set(m[0], m[0])
			return reply{}
		}),
		r("if", `dcb pfc enable( \S+)? mode (manual|auto)`, true, func(sh *modalShell, m []string) reply {
			sh.set(m[0], "dcb pfc enable")
			return reply{}
		}),
		r("if", `dcb pfc buffer ([0-7]) xoff dynamic (\d+) hdrm (\d+) cells`, true, func(sh *modalShell, m []string) reply {
			sh.set(m[0], "dcb pfc buffer "+m[1])
			return reply{}
		}),
		r("if", `qos queue ([0-7]) wred (\S+)`, true, func(sh *modalShell, m []string) reply {
			if sh.root.find("drop-profile "+m[2]) == nil {
				return out("Error: The drop-profile %s does not exist.", m[2])
			}
			sh.set(m[0], "qos queue "+m[1]+" wred")
			return reply{}
		}),
		r("if", `qos queue ([0-7]) ecn`, true, func(sh *modalShell, m []string) reply {
			sh.set(m[0], m[0])
			return reply{}
		}),
	}
}
