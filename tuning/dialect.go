package tuning

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

// Intent is what one switch should be configured with, independent of its
// vendor: the watermark for its lossless priority on some ports. The
// paper's "configuration language translation" (Section 5.4) renders the
// intents of one switch into that switch's own commands.
type Intent struct {
	Switch string `json:"switch"`
	// Ports are the interfaces (vendor names) the watermark applies to.
	Ports []string `json:"ports"`
	// Prio is the lossless 802.1p priority (and its queue).
	Prio int       `json:"prio"`
	Cell int64     `json:"cell_bytes"`
	W    Watermark `json:"watermark"`
	// QueueCells is the egress queue length the vendor's WRED limits are
	// percentages of (VRP's drop profiles); zero where limits are absolute.
	QueueCells int64 `json:"queue_cells,omitempty"`
}

// Validate checks the intent; port names are the dialect's to judge.
func (in Intent) Validate() error {
	switch {
	case in.Switch == "":
		return fmt.Errorf("intent: no switch name")
	case len(in.Ports) == 0:
		return fmt.Errorf("intent for %s: no ports", in.Switch)
	case in.Prio < 0 || in.Prio > 7:
		return fmt.Errorf("intent for %s: priority %d", in.Switch, in.Prio)
	case in.Cell <= 0:
		return fmt.Errorf("intent for %s: cell %d", in.Switch, in.Cell)
	}
	return in.W.Validate()
}

// bytes is a threshold in bytes.
func (in Intent) bytes(cells int64) int64 { return cells * in.Cell }

// alphaFrac is the dynamic threshold as a fraction of free buffer.
func (in Intent) alphaFrac() float64 { return in.W.Alpha * AlphaUnit }

// pmax is the marking probability as the whole percent vendors take.
func (in Intent) pmax() int { return min(max(int(math.Round(in.W.Pmax)), 1), 100) }

// Dialect renders the intents of one switch as its vendor's configuration
// commands and knows how that vendor's CLI is driven: prompts, errors,
// the transaction around the commands (checkpoint, session or candidate;
// commit; rollback) and how the running configuration shows the result.
type Dialect interface {
	Name() string
	// CheckPort refuses a name that is not one of the vendor's interface
	// names (an allow-list: anything else, separators included, fails).
	CheckPort(name string) error
	// Apply is the configuration commands for one switch's intents, in
	// order, entered from the top configuration level and leaving it
	// there.
	Apply(ins []Intent) ([]string, error)

	cli() cliSpec
	// plan wraps the commands in the vendor's transaction; id names the
	// checkpoint, session or file, unique per push.
	plan(cmds []string, id string) plan
	// verify checks the running configuration shows every intent.
	verify(running string, ins []Intent) error
	// canon is the running configuration without what changes on its own
	// (timestamps, comments), to compare before and after a rollback.
	canon(running string) string
	// standInPort names port i of a switch that has no real names (the
	// simulator's, in reports).
	standInPort(i int) string
}

// Dialects are the supported vendors by name.
func Dialects() map[string]Dialect {
	return map[string]Dialect{"sonic": sonic{}, "eos": eos{}, "nxos": nxos{}, "vrp": vrp{}, "comware": comware{}}
}

// DialectNames are the dialects, sorted.
func DialectNames() []string {
	var out []string
	for n := range Dialects() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DialectByName finds a dialect.
func DialectByName(name string) (Dialect, error) {
	d, ok := Dialects()[name]
	if !ok {
		return nil, fmt.Errorf("dialect %q: one of %s", name, strings.Join(DialectNames(), ", "))
	}
	return d, nil
}

// Render is the intent in dialect d as one text (a report, a golden file).
func Render(d Dialect, ins ...Intent) (string, error) {
	cmds, err := d.Apply(ins)
	if err != nil {
		return "", err
	}
	return strings.Join(cmds, "\n") + "\n", nil
}

// checkIntents validates one switch's intents for dialect d: each intent,
// each port against the vendor's pattern, one priority for the switch.
func checkIntents(d Dialect, ins []Intent) error {
	if len(ins) == 0 {
		return errors.New("no intents")
	}
	for _, in := range ins {
		if err := in.Validate(); err != nil {
			return err
		}
		if in.Prio != ins[0].Prio {
			return fmt.Errorf("intents for %s: priorities %d and %d (one lossless priority per switch)", in.Switch, ins[0].Prio, in.Prio)
		}
		for _, p := range in.Ports {
			if err := d.CheckPort(p); err != nil {
				return fmt.Errorf("switch %s: %w", in.Switch, err)
			}
		}
	}
	return nil
}

// portPattern is a vendor's allow-list of interface names.
type portPattern struct {
	vendor, form string
	re           *regexp.Regexp
}

func (p portPattern) check(name string) error {
	if !p.re.MatchString(name) {
		return fmt.Errorf("port %q: not a %s interface name (%s)", name, p.vendor, p.form)
	}
	return nil
}

// objName names a per-intent object (profile, table, policy): the first
// intent of a switch gets base, the others base-2, base-3..., so per-port
// scopes on one switch do not overwrite each other's thresholds.
func objName(base string, i int) string {
	if i == 0 {
		return base
	}
	return fmt.Sprintf("%s-%d", base, i+1)
}

// want is one line the running configuration must show, under the
// section headers of path.
type want struct {
	path []string
	line string
}

// verifyTree checks running (an indented configuration: EOS, NX-OS, VRP,
// Comware) for every wanted line.
func verifyTree(running string, wants []want) error {
	t := parseTree(running)
	var missing []string
	for _, w := range wants {
		if !t.has(w.path, w.line) {
			missing = append(missing, strings.Join(append(append([]string(nil), w.path...), w.line), " > "))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("running config lacks %d line(s): %s", len(missing), strings.Join(missing, "; "))
	}
	return nil
}

// cfgNode is a line of an indented configuration and the lines indented
// under it.
type cfgNode struct {
	line     string
	children []*cfgNode
}

// parseTree reads an indented configuration: a line belongs to the
// nearest line above it that is indented less. Separator and comment
// lines ("!", "#" and lines starting with "!") are skipped.
func parseTree(text string) *cfgNode {
	root := &cfgNode{}
	type open struct {
		indent int
		n      *cfgNode
	}
	stack := []open{{-1, root}}
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		trim := strings.TrimLeft(line, " \t")
		if trim == "" || trim == "#" || strings.HasPrefix(trim, "!") {
			continue
		}
		indent := len(line) - len(trim)
		for len(stack) > 1 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		n := &cfgNode{line: trim}
		parent := stack[len(stack)-1].n
		parent.children = append(parent.children, n)
		stack = append(stack, open{indent, n})
	}
	return root
}

func (n *cfgNode) has(path []string, line string) bool {
	if len(path) == 0 {
		for _, c := range n.children {
			if c.line == line {
				return true
			}
		}
		return false
	}
	for _, c := range n.children {
		if c.line == path[0] && c.has(path[1:], line) {
			return true
		}
	}
	return false
}

// canonLines drops what a CLI vendor's running configuration changes on
// its own: comment lines (timestamps, versions) and trailing blanks.
func canonLines(running string) string {
	var out []string
	for _, l := range strings.Split(running, "\n") {
		l = strings.TrimRight(l, " \t\r")
		if l == "" || strings.HasPrefix(strings.TrimSpace(l), "!") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

const profileName = "BYTETUNING"

// sonic drives SONiC's bash shell. The watermarks go into CONFIG_DB as one
// RFC 6902 JSON patch through the Generic Config Updater (`config
// apply-patch`, read from stdin so no file is left on the switch), guarded
// by a named `config checkpoint` that `config rollback` restores
// (sonic-net/SONiC doc/config-generic-update-rollback; sonic-utilities
// config/main.py opens the patch path with open(), so /dev/stdin works).
// The tables and fields are those of the SONiC configuration database
// manual: WRED_PROFILE (green thresholds in bytes, ecn_all), BUFFER_PROFILE
// (xoff, size, dynamic_th as log2 of the free-buffer fraction), QUEUE and
// BUFFER_PG keyed "port|prio". `show runningconfiguration all` prints
// CONFIG_DB as JSON for the verification.
type sonic struct{}

func (sonic) Name() string { return "sonic" }

var sonicPorts = portPattern{"SONiC", "EthernetN", regexp.MustCompile(`^Ethernet[0-9]{1,4}$`)}

func (sonic) CheckPort(name string) error { return sonicPorts.check(name) }
func (sonic) standInPort(i int) string    { return fmt.Sprintf("Ethernet%d", 4*i) }

// sonicRows are the CONFIG_DB rows the intents ask for: table -> key ->
// fields.
func sonicRows(ins []Intent) map[string]map[string]map[string]string {
	rows := map[string]map[string]map[string]string{"WRED_PROFILE": {}, "BUFFER_PROFILE": {}, "QUEUE": {}, "BUFFER_PG": {}}
	for i, in := range ins {
		wred := objName(profileName, i)
		buf := objName("pg_lossless_bytetuning_profile", i)
		rows["WRED_PROFILE"][wred] = map[string]string{
			"ecn":                    "ecn_all",
			"wred_green_enable":      "true",
			"green_min_threshold":    fmt.Sprint(in.bytes(in.W.Kmin)),
			"green_max_threshold":    fmt.Sprint(in.bytes(in.W.Kmax)),
			"green_drop_probability": fmt.Sprint(in.pmax()),
		}
		rows["BUFFER_PROFILE"][buf] = map[string]string{
			"pool":       "ingress_lossless_pool",
			"xoff":       fmt.Sprint(in.bytes(in.W.Headroom)),
			"size":       fmt.Sprint(in.bytes(in.W.Headroom) + 2*in.Cell*8),
			"xon":        fmt.Sprint(in.Cell * 8),
			"dynamic_th": fmt.Sprint(int(math.Round(math.Log2(in.alphaFrac())))),
		}
		for _, p := range in.Ports {
			key := fmt.Sprintf("%s|%d", p, in.Prio)
			rows["QUEUE"][key] = map[string]string{"wred_profile": wred}
			rows["BUFFER_PG"][key] = map[string]string{"profile": buf}
		}
	}
	return rows
}

// sonicPatchLimit keeps each apply-patch command line short enough for
// any shell and terminal on the way; a longer patch is split, which the
// checkpoint around them makes safe.
const sonicPatchLimit = 2000

func (s sonic) Apply(ins []Intent) ([]string, error) {
	if err := checkIntents(s, ins); err != nil {
		return nil, err
	}
	rows := sonicRows(ins)
	type op struct {
		Op    string            `json:"op"`
		Path  string            `json:"path"`
		Value map[string]string `json:"value"`
	}
	var cmds []string
	var batch []op
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		b, err := json.Marshal(batch)
		if err != nil {
			return err
		}
		cmds = append(cmds, "echo '"+string(b)+"' | sudo config apply-patch /dev/stdin")
		batch, size = nil, 0
		return nil
	}
	// Profiles before the rows that name them: the updater validates
	// references against the YANG models.
	for _, table := range []string{"WRED_PROFILE", "BUFFER_PROFILE", "QUEUE", "BUFFER_PG"} {
		keys := make([]string, 0, len(rows[table]))
		for k := range rows[table] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			o := op{"add", "/" + table + "/" + k, rows[table][k]}
			b, _ := json.Marshal(o)
			if size+len(b) > sonicPatchLimit {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			batch, size = append(batch, o), size+len(b)+1
		}
	}
	return cmds, flush()
}

func (sonic) plan(cmds []string, id string) plan {
	return plan{
		prepare:  append([]step{{cmd: "sudo config checkpoint " + id}}, steps(cmds)...),
		live:     1,
		discard:  []step{{cmd: "sudo config delete-checkpoint " + id}},
		rollback: []step{{cmd: "sudo config rollback " + id}, {cmd: "sudo config delete-checkpoint " + id}},
		confirm:  []step{{cmd: "sudo config save -y"}, {cmd: "sudo config delete-checkpoint " + id}},
		undoable: 1,
		show:     "show runningconfiguration all",
	}
}

func (sonic) verify(running string, ins []Intent) error {
	var db map[string]map[string]map[string]any
	if err := json.Unmarshal([]byte(jsonPart(running)), &db); err != nil {
		return fmt.Errorf("running config is not CONFIG_DB JSON: %w", err)
	}
	var missing []string
	for table, keys := range sonicRows(ins) {
		for key, fields := range keys {
			for f, v := range fields {
				if got, ok := db[table][key][f]; !ok || fmt.Sprint(got) != v {
					missing = append(missing, fmt.Sprintf("%s|%s %s=%s (has %v)", table, key, f, v, got))
				}
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("running config lacks %d field(s): %s", len(missing), strings.Join(missing, "; "))
	}
	return nil
}

func (sonic) canon(running string) string {
	var v any
	if err := json.Unmarshal([]byte(jsonPart(running)), &v); err != nil {
		return running
	}
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return string(b)
}

// jsonPart is the JSON object in a command's output (from the first "{").
func jsonPart(s string) string {
	if i := strings.Index(s, "{"); i >= 0 {
		return s[i:]
	}
	return s
}

// eos is Arista EOS. Per-queue ECN under the interface's tx-queue
// ("random-detect ecn minimum-threshold N bytes maximum-threshold N bytes
// max-mark-probability P", units segments|bytes|kbytes|mbytes), PFC with
// "priority-flow-control on" and "priority-flow-control priority P
// no-drop" (the forms Arista's AVD eos_cli_config_gen templates write and
// AMD's RoCE cluster guide shows), and the Trident MMU's ingress headroom
// and priority-group dynamic threshold (1/128 .. 8) in a queue profile
// applied platform-wide ("platform trident mmu queue profile NAME" and
// "... NAME apply", AVD's platform-trident templates). The push runs in a
// configuration session committed with a timer (Arista EOS manual,
// "configure session"; "commit timer" rolls back unless confirmed by
// "configure session NAME commit", "configure session NAME abort" restores
// the previous running-config).
type eos struct{}

func (eos) Name() string { return "eos" }

var eosPorts = portPattern{"EOS", "Ethernet<n>[/<n>[/<n>]]", regexp.MustCompile(`^Ethernet[0-9]{1,3}(/[0-9]{1,3}){0,2}$`)}

func (eos) CheckPort(name string) error { return eosPorts.check(name) }
func (eos) standInPort(i int) string    { return fmt.Sprintf("Ethernet%d", i+1) }

// eosThreshold is a dynamic threshold as the nearest power of two EOS
// accepts: 1/128, 1/64, ..., 1, 2, 4, 8.
func eosThreshold(f float64) string {
	k := min(max(int(math.Round(math.Log2(f))), -7), 3)
	if k >= 0 {
		return fmt.Sprint(1 << k)
	}
	return fmt.Sprintf("1/%d", 1<<-k)
}

const eosProfile = "bytetuning"

func (e eos) parts(in Intent) (headroom, threshold, ecn string) {
	return fmt.Sprintf("ingress headroom bytes %d", in.bytes(in.W.Headroom)),
		fmt.Sprintf("ingress priority-group %d threshold %s", in.Prio, eosThreshold(in.alphaFrac())),
		fmt.Sprintf("random-detect ecn minimum-threshold %d bytes maximum-threshold %d bytes max-mark-probability %d",
			in.bytes(in.W.Kmin), in.bytes(in.W.Kmax), in.pmax())
}

func (e eos) Apply(ins []Intent) ([]string, error) {
	if err := checkIntents(e, ins); err != nil {
		return nil, err
	}
	hr, th, _ := e.parts(ins[0])
	for _, in := range ins[1:] {
		if h, t, _ := e.parts(in); h != hr || t != th {
			return nil, fmt.Errorf("switch %s: eos: the MMU queue profile is platform-wide, so per-port scopes must agree on headroom and alpha", in.Switch)
		}
	}
	cmds := []string{"platform trident mmu queue profile " + eosProfile, "   " + hr, "   " + th, "   exit",
		"platform trident mmu queue profile " + eosProfile + " apply"}
	for _, in := range ins {
		_, _, ecn := e.parts(in)
		for _, p := range in.Ports {
			cmds = append(cmds, "interface "+p,
				"   priority-flow-control on",
				fmt.Sprintf("   priority-flow-control priority %d no-drop", in.Prio),
				fmt.Sprintf("   tx-queue %d", in.Prio),
				"      "+ecn,
				"      exit", "   exit")
		}
	}
	return cmds, nil
}

func (e eos) wants(ins []Intent) []want {
	hr, th, _ := e.parts(ins[0])
	prof := "platform trident mmu queue profile " + eosProfile
	ws := []want{{[]string{prof}, hr}, {[]string{prof}, th}, {nil, prof + " apply"}}
	for _, in := range ins {
		_, _, ecn := e.parts(in)
		for _, p := range in.Ports {
			ifc := "interface " + p
			ws = append(ws, want{[]string{ifc}, "priority-flow-control on"},
				want{[]string{ifc}, fmt.Sprintf("priority-flow-control priority %d no-drop", in.Prio)},
				want{[]string{ifc, fmt.Sprintf("tx-queue %d", in.Prio)}, ecn})
		}
	}
	return ws
}

// eosCommitTimer bounds how long a push may sit unconfirmed: if the
// appliance dies between commit and confirm, EOS rolls back by itself.
const eosCommitTimer = "00:10:00"

func (eos) plan(cmds []string, id string) plan {
	p := plan{prepare: []step{{cmd: "configure session " + id}}}
	p.prepare = append(p.prepare, steps(cmds)...)
	p.live = len(p.prepare)
	p.prepare = append(p.prepare, step{cmd: "commit timer " + eosCommitTimer})
	p.discard = []step{{cmd: "configure session " + id + " abort"}}
	p.rollback = p.discard
	p.confirm, p.undoable = []step{{cmd: "configure session " + id + " commit"}, {cmd: "write memory"}}, 1
	p.show = "show running-config"
	return p
}

func (e eos) verify(running string, ins []Intent) error { return verifyTree(running, e.wants(ins)) }
func (eos) canon(running string) string                 { return canonLines(running) }

// nxos is Cisco NX-OS on the Nexus 9000, in the form of Cisco's RoCEv2
// blueprint and the Nexus 9000 QoS configuration guide: PFC on the
// lossless class of a network-qos policy ("pause pfc-cos P") attached
// under "system qos", "priority-flow-control mode on" per interface, ECN
// WRED on the egress queue ("random-detect minimum-threshold N bytes
// maximum-threshold N bytes drop-probability P weight 0 ecn" in class
// c-out-8q-qP of a queuing policy) and the ingress pause buffer ("pause
// buffer-size B pause-threshold T resume-threshold R" in class c-in-qP of
// an input queuing policy, the guide's "pause buffer size threshold"):
// headroom is buffer-size minus pause-threshold. NX-OS has no dynamic
// threshold knob for this class, so alpha is not pushed. Changes apply
// at once; a named "checkpoint" taken first is what "rollback
// running-config checkpoint NAME" restores (NX-OS configuration rollback).
type nxos struct{}

func (nxos) Name() string { return "nxos" }

var nxosPorts = portPattern{"NX-OS", "Ethernet<slot>/<port>[/<sub>]", regexp.MustCompile(`^Ethernet[0-9]{1,3}/[0-9]{1,3}(/[0-9]{1,3})?$`)}

func (nxos) CheckPort(name string) error { return nxosPorts.check(name) }
func (nxos) standInPort(i int) string    { return fmt.Sprintf("Ethernet1/%d", i+1) }

const nxosNQ = "bytetuning-nq"

func (nxos) parts(in Intent, i int) (inPol, outPol, pause, wred string) {
	h := in.bytes(in.W.Headroom)
	return objName("bytetuning-in", i), objName("bytetuning-out", i),
		fmt.Sprintf("pause buffer-size %d pause-threshold %d resume-threshold %d", 2*h, h, h-min(h, 8*in.Cell)),
		fmt.Sprintf("random-detect minimum-threshold %d bytes maximum-threshold %d bytes drop-probability %d weight 0 ecn",
			in.bytes(in.W.Kmin), in.bytes(in.W.Kmax), in.pmax())
}

func (n nxos) Apply(ins []Intent) ([]string, error) {
	if err := checkIntents(n, ins); err != nil {
		return nil, err
	}
	prio := ins[0].Prio
	cmds := []string{"policy-map type network-qos " + nxosNQ,
		fmt.Sprintf("  class type network-qos c-8q-nq%d", prio),
		fmt.Sprintf("    pause pfc-cos %d", prio),
		"    mtu 9216", "    exit", "  exit"}
	for i, in := range ins {
		inPol, outPol, pause, wred := n.parts(in, i)
		cmds = append(cmds, "policy-map type queuing "+inPol,
			fmt.Sprintf("  class type queuing c-in-q%d", prio), "    "+pause, "    exit", "  exit",
			"policy-map type queuing "+outPol,
			fmt.Sprintf("  class type queuing c-out-8q-q%d", prio), "    "+wred, "    exit", "  exit")
	}
	cmds = append(cmds, "system qos", "  service-policy type network-qos "+nxosNQ, "  exit")
	for i, in := range ins {
		inPol, outPol, _, _ := n.parts(in, i)
		for _, p := range in.Ports {
			cmds = append(cmds, "interface "+p, "  priority-flow-control mode on",
				"  service-policy type queuing input "+inPol, "  service-policy type queuing output "+outPol, "  exit")
		}
	}
	return cmds, nil
}

func (n nxos) wants(ins []Intent) []want {
	prio := ins[0].Prio
	ws := []want{
		{[]string{"policy-map type network-qos " + nxosNQ, fmt.Sprintf("class type network-qos c-8q-nq%d", prio)}, fmt.Sprintf("pause pfc-cos %d", prio)},
		{[]string{"system qos"}, "service-policy type network-qos " + nxosNQ}}
	for i, in := range ins {
		inPol, outPol, pause, wred := n.parts(in, i)
		ws = append(ws, want{[]string{"policy-map type queuing " + inPol, fmt.Sprintf("class type queuing c-in-q%d", prio)}, pause},
			want{[]string{"policy-map type queuing " + outPol, fmt.Sprintf("class type queuing c-out-8q-q%d", prio)}, wred})
		for _, p := range in.Ports {
			ifc := []string{"interface " + p}
			ws = append(ws, want{ifc, "priority-flow-control mode on"},
				want{ifc, "service-policy type queuing input " + inPol}, want{ifc, "service-policy type queuing output " + outPol})
		}
	}
	return ws
}

func (nxos) plan(cmds []string, id string) plan {
	p := plan{prepare: []step{{cmd: "checkpoint " + id}, {cmd: "configure terminal"}}, live: 1}
	p.prepare = append(append(p.prepare, steps(cmds)...), step{cmd: "end"})
	p.discard = []step{{cmd: "no checkpoint " + id}}
	p.rollback = []step{{cmd: "rollback running-config checkpoint " + id}, {cmd: "no checkpoint " + id}}
	p.confirm, p.undoable = []step{{cmd: "copy running-config startup-config"}, {cmd: "no checkpoint " + id}}, 1
	p.show = "show running-config"
	return p
}

func (n nxos) verify(running string, ins []Intent) error { return verifyTree(running, n.wants(ins)) }
func (nxos) canon(running string) string                 { return canonLines(running) }

// vrp is Huawei VRP on CloudEngine switches (VRP V8, two-phase
// validation). A WRED drop profile ("drop-profile NAME", "color green
// low-limit L high-limit H discard-percentage P" where the limits are
// percentages of the queue length, per the CloudEngine command reference)
// bound to the lossless queue with ECN ("qos queue P wred NAME", "qos
// queue P ecn"), PFC through the DCB profile ("dcb pfc", "priority P",
// "dcb pfc enable mode manual") and the PFC buffer's dynamic XOFF and
// headroom in cells per interface. Commands edit the candidate
// configuration (the prompt turns from [~HOST] to [*HOST]); "commit
// trial" makes them running with an automatic rollback unless a later
// "commit" confirms, "abort trial" rolls back at once and "clear
// configuration candidate" drops what was never committed (VRP V8
// command reference, configuration management).
type vrp struct{}

func (vrp) Name() string { return "vrp" }

var vrpPorts = portPattern{"VRP", "<10|25|40|100|200|400>GE<slot>/<card>/<port>[:<lane>]",
	regexp.MustCompile(`^(10|25|40|100|200|400)GE[0-9]{1,2}/[0-9]{1,2}/[0-9]{1,3}(:[0-9])?$`)}

func (vrp) CheckPort(name string) error { return vrpPorts.check(name) }
func (vrp) standInPort(i int) string    { return fmt.Sprintf("100GE1/0/%d", i+1) }

func (vrp) parts(in Intent, i int) (profile, color string, err error) {
	if in.QueueCells <= 0 {
		return "", "", fmt.Errorf("switch %s: vrp: drop-profile limits are percentages of the queue length; set the switch's queue-cells", in.Switch)
	}
	pct := func(c int64) int { return int(math.Round(100 * float64(c) / float64(in.QueueCells))) }
	lo, hi := pct(in.W.Kmin), pct(in.W.Kmax)
	if hi > 100 {
		return "", "", fmt.Errorf("switch %s: vrp: Kmax %d cells is above the queue length of %d cells", in.Switch, in.W.Kmax, in.QueueCells)
	}
	return strings.ToLower(objName(profileName, i)),
		fmt.Sprintf("color green low-limit %d high-limit %d discard-percentage %d", lo, hi, in.pmax()), nil
}

func (vrp) ifLines(in Intent, prof string) []string {
	return []string{"dcb pfc enable mode manual",
		fmt.Sprintf("dcb pfc buffer %d xoff dynamic %d hdrm %d cells", in.Prio, max(int(math.Round(in.W.Alpha)), 1), in.W.Headroom),
		fmt.Sprintf("qos queue %d wred %s", in.Prio, prof),
		fmt.Sprintf("qos queue %d ecn", in.Prio)}
}

func (v vrp) Apply(ins []Intent) ([]string, error) {
	if err := checkIntents(v, ins); err != nil {
		return nil, err
	}
	var cmds []string
	for i, in := range ins {
		prof, color, err := v.parts(in, i)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, "drop-profile "+prof, " "+color, " quit")
	}
	cmds = append(cmds, "dcb pfc", fmt.Sprintf(" priority %d", ins[0].Prio), " quit")
	for i, in := range ins {
		prof, _, _ := v.parts(in, i)
		for _, p := range in.Ports {
			cmds = append(cmds, "interface "+p)
			for _, l := range v.ifLines(in, prof) {
				cmds = append(cmds, " "+l)
			}
			cmds = append(cmds, " quit")
		}
	}
	return cmds, nil
}

func (v vrp) wants(ins []Intent) []want {
	ws := []want{{[]string{"dcb pfc"}, fmt.Sprintf("priority %d", ins[0].Prio)}}
	for i, in := range ins {
		prof, color, _ := v.parts(in, i)
		ws = append(ws, want{[]string{"drop-profile " + prof}, color})
		for _, p := range in.Ports {
			for _, l := range v.ifLines(in, prof) {
				ws = append(ws, want{[]string{"interface " + p}, l})
			}
		}
	}
	return ws
}

// vrpTrialSeconds bounds an unconfirmed commit, as eosCommitTimer.
const vrpTrialSeconds = 600

func (vrp) plan(cmds []string, _ string) plan {
	p := plan{prepare: []step{{cmd: "system-view"}}}
	p.prepare = append(p.prepare, steps(cmds)...)
	// A commit either applies every change or none, so only after it
	// does a failure need the running configuration rolled back.
	p.prepare = append(p.prepare, step{cmd: fmt.Sprintf("commit trial %d", vrpTrialSeconds)})
	p.live = len(p.prepare)
	p.prepare = append(p.prepare, step{cmd: "return"})
	p.rollback = []step{{cmd: "system-view"}, {cmd: "abort trial"}, {cmd: "return"}}
	p.confirm, p.undoable = []step{{cmd: "system-view"}, {cmd: "commit"}, {cmd: "return"}, {cmd: "save", answer: "Y"}}, 3
	p.show = "display current-configuration"
	return p
}

func (v vrp) verify(running string, ins []Intent) error { return verifyTree(running, v.wants(ins)) }
func (vrp) canon(running string) string                 { return canonLines(running) }

// comware is H3C Comware 7 (what the authors' public code pushes): a
// queue-based WRED table ("qos wred queue table NAME", "queue P drop-level
// 0 low-limit L high-limit H discard-probability D", "queue P ecn",
// limits 0..16000) applied per interface ("qos wred apply NAME"), and PFC
// per interface ("priority-flow-control enable", "priority-flow-control
// no-drop dot1p P", "priority-flow-control dot1p P headroom N",
// "priority-flow-control dot1p P ingress-buffer dynamic N"), per the H3C
// ACL and QoS and PFC command references. Changes apply at once; the
// running configuration saved first to a file named for this push
// ("save flash:/NAME.cfg") is what "configuration replace file" restores
// (H3C fundamentals guide, configuration rollback), and the file is
// deleted afterwards either way.
type comware struct{}

func (comware) Name() string { return "comware" }

var comwarePorts = portPattern{"Comware", "<type><slot>/<card>/<port>[:<lane>] with the full type name, e.g. HundredGigE1/0/1",
	regexp.MustCompile(`^(GigabitEthernet|Ten-GigabitEthernet|Twenty-FiveGigE|FortyGigE|FiftyGigE|HundredGigE|TwoHundredGigE|FourHundredGigE)[0-9]{1,2}/[0-9]{1,2}/[0-9]{1,3}(:[0-9])?$`)}

func (comware) CheckPort(name string) error { return comwarePorts.check(name) }
func (comware) standInPort(i int) string    { return fmt.Sprintf("HundredGigE1/0/%d", i+1) }

// comwareMaxLimit is the largest WRED table limit Comware takes.
const comwareMaxLimit = 16000

func (comware) parts(in Intent, i int) (table string, lines []string, ifLines []string, err error) {
	if in.W.Kmax > comwareMaxLimit {
		return "", nil, nil, fmt.Errorf("switch %s: comware: Kmax %d cells is above the WRED table's limit of %d", in.Switch, in.W.Kmax, comwareMaxLimit)
	}
	table = objName(profileName, i)
	lines = []string{fmt.Sprintf("queue %d drop-level 0 low-limit %d high-limit %d discard-probability %d", in.Prio, in.W.Kmin, in.W.Kmax, in.pmax()),
		fmt.Sprintf("queue %d ecn", in.Prio)}
	ifLines = []string{"qos wred apply " + table,
		"priority-flow-control enable",
		fmt.Sprintf("priority-flow-control no-drop dot1p %d", in.Prio),
		fmt.Sprintf("priority-flow-control dot1p %d headroom %d", in.Prio, in.W.Headroom),
		fmt.Sprintf("priority-flow-control dot1p %d ingress-buffer dynamic %d", in.Prio, max(int(math.Round(in.W.Alpha)), 1))}
	return table, lines, ifLines, nil
}

func (c comware) Apply(ins []Intent) ([]string, error) {
	if err := checkIntents(c, ins); err != nil {
		return nil, err
	}
	var cmds, ifs []string
	for i, in := range ins {
		table, lines, ifLines, err := c.parts(in, i)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, "qos wred queue table "+table)
		for _, l := range lines {
			cmds = append(cmds, " "+l)
		}
		cmds = append(cmds, " quit")
		for _, p := range in.Ports {
			ifs = append(ifs, "interface "+p)
			for _, l := range ifLines {
				ifs = append(ifs, " "+l)
			}
			ifs = append(ifs, " quit")
		}
	}
	return append(cmds, ifs...), nil
}

func (c comware) wants(ins []Intent) []want {
	var ws []want
	for i, in := range ins {
		table, lines, ifLines, _ := c.parts(in, i)
		for _, l := range lines {
			ws = append(ws, want{[]string{"qos wred queue table " + table}, l})
		}
		for _, p := range in.Ports {
			for _, l := range ifLines {
				ws = append(ws, want{[]string{"interface " + p}, l})
			}
		}
	}
	return ws
}

func (comware) plan(cmds []string, id string) plan {
	file := "flash:/" + id + ".cfg"
	del := step{cmd: "delete /unreserved " + file, answer: "Y"}
	p := plan{prepare: []step{{cmd: "save " + file, answer: "Y"}, {cmd: "system-view"}}, live: 1}
	p.prepare = append(append(p.prepare, steps(cmds)...), step{cmd: "return"})
	p.discard = []step{del}
	// Replacing asks whether to save the configuration it replaces: no,
	// that is the one being undone.
	p.rollback = []step{{cmd: "system-view"}, {cmd: "configuration replace file " + file, answer: "N"}, {cmd: "return"}, del}
	p.confirm, p.undoable = []step{{cmd: "save force"}, del}, 1
	p.show = "display current-configuration"
	return p
}

func (c comware) verify(running string, ins []Intent) error { return verifyTree(running, c.wants(ins)) }
func (comware) canon(running string) string                 { return canonLines(running) }

// steps are plain configuration commands as transaction steps; the
// indentation of a rendering is for people, not for the switch.
func steps(cmds []string) []step {
	out := make([]step, len(cmds))
	for i, c := range cmds {
		out[i] = step{cmd: strings.TrimSpace(c)}
	}
	return out
}
