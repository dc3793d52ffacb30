package tuning

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Intent is what one switch should be configured with, independent of its
// vendor: the watermark for its lossless priority on some ports. The
// paper's "configuration language translation" (Section 5.4) renders one
// intent into each switch's own commands.
type Intent struct {
	Switch string `json:"switch"`
	// Ports are the interfaces (vendor names) the watermark applies to.
	Ports []string `json:"ports"`
	// Prio is the lossless 802.1p priority (and its queue).
	Prio int       `json:"prio"`
	Cell int64     `json:"cell_bytes"`
	W    Watermark `json:"watermark"`
}

// Validate checks the intent.
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
	for _, p := range in.Ports {
		if p == "" || strings.ContainsAny(p, "\n\r;'\"`$") {
			return fmt.Errorf("intent for %s: port name %q", in.Switch, p)
		}
	}
	return in.W.Validate()
}

// bytes is a threshold in bytes.
func (in Intent) bytes(cells int64) int64 { return cells * in.Cell }

// alphaFrac is the dynamic threshold as a fraction of free buffer.
func (in Intent) alphaFrac() float64 { return in.W.Alpha * AlphaUnit }

// Dialect renders intents as one vendor's configuration commands. The
// command forms follow each vendor's documented configuration syntax for
// WRED/ECN and PFC buffers; they have not been run against real devices
// here.
type Dialect interface {
	Name() string
	// Apply is the commands that configure the intent, in order.
	Apply(in Intent) ([]string, error)
	// Undo is the commands that return the intent's ports to the
	// switch's defaults (rollback when the previous intent is unknown).
	Undo(in Intent) []string
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
func Render(d Dialect, in Intent) (string, error) {
	cmds, err := d.Apply(in)
	if err != nil {
		return "", err
	}
	return strings.Join(cmds, "\n") + "\n", nil
}

const profileName = "BYTETUNING"

// sonic writes a config_db.json fragment (WRED_PROFILE, BUFFER_PROFILE,
// QUEUE, BUFFER_PG) and loads it with `config load`.
type sonic struct{}

func (sonic) Name() string { return "sonic" }

// ConfigDB is the config_db.json fragment for the intent.
func sonicConfigDB(in Intent) map[string]any {
	// SONiC's dynamic_th is log2 of the fraction of free buffer.
	dth := int(math.Round(math.Log2(in.alphaFrac())))
	prof := "pg_lossless_bytetuning_profile"
	db := map[string]any{
		"WRED_PROFILE": map[string]any{profileName: map[string]string{
			"ecn":                    "ecn_all",
			"wred_green_enable":      "true",
			"green_min_threshold":    fmt.Sprint(in.bytes(in.W.Kmin)),
			"green_max_threshold":    fmt.Sprint(in.bytes(in.W.Kmax)),
			"green_drop_probability": fmt.Sprint(int(math.Round(in.W.Pmax))),
		}},
		"BUFFER_PROFILE": map[string]any{prof: map[string]string{
			"pool":       "ingress_lossless_pool",
			"xoff":       fmt.Sprint(in.bytes(in.W.Headroom)),
			"size":       fmt.Sprint(in.bytes(in.W.Headroom) + 2*in.Cell*8),
			"xon":        fmt.Sprint(in.Cell * 8),
			"dynamic_th": fmt.Sprint(dth),
		}},
	}
	q, pg := map[string]any{}, map[string]any{}
	for _, p := range in.Ports {
		q[fmt.Sprintf("%s|%d", p, in.Prio)] = map[string]string{"wred_profile": profileName}
		pg[fmt.Sprintf("%s|%d", p, in.Prio)] = map[string]string{"profile": prof}
	}
	db["QUEUE"], db["BUFFER_PG"] = q, pg
	return db
}

func (sonic) Apply(in Intent) ([]string, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(sonicConfigDB(in), "", "  ")
	if err != nil {
		return nil, err
	}
	return []string{
		"cat > /tmp/bytetuning.json <<'BYTETUNING_EOF'\n" + string(b) + "\nBYTETUNING_EOF",
		"sudo config load -y /tmp/bytetuning.json",
	}, nil
}

func (sonic) Undo(in Intent) []string {
	var cmds []string
	for _, p := range in.Ports {
		cmds = append(cmds, fmt.Sprintf("sudo sonic-db-cli CONFIG_DB del 'QUEUE|%s|%d'", p, in.Prio))
		cmds = append(cmds, fmt.Sprintf("sudo sonic-db-cli CONFIG_DB del 'BUFFER_PG|%s|%d'", p, in.Prio))
	}
	return cmds
}

// eos is Arista EOS: per-queue ECN under tx-queue, PFC no-drop, and the
// Trident MMU's ingress thresholds through a queue profile.
type eos struct{}

func (eos) Name() string { return "eos" }

func (eos) Apply(in Intent) ([]string, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	cmds := []string{"configure",
		"platform trident mmu queue-profile " + strings.ToLower(profileName),
		fmt.Sprintf("   ingress priority-group %d headroom %d bytes", in.Prio, in.bytes(in.W.Headroom)),
		fmt.Sprintf("   ingress priority-group %d threshold %s", in.Prio, fraction(in.alphaFrac())),
		"   exit"}
	for _, p := range in.Ports {
		cmds = append(cmds, "interface "+p,
			"   priority-flow-control on",
			fmt.Sprintf("   priority-flow-control priority %d no-drop", in.Prio),
			fmt.Sprintf("   tx-queue %d", in.Prio),
			fmt.Sprintf("      random-detect ecn minimum-threshold %d bytes maximum-threshold %d bytes max-mark-probability %d",
				in.bytes(in.W.Kmin), in.bytes(in.W.Kmax), int(math.Round(in.W.Pmax))),
			"      exit", "   exit")
	}
	return append(cmds, "platform trident mmu queue-profile "+strings.ToLower(profileName)+" apply", "end", "write memory"), nil
}

func (eos) Undo(in Intent) []string {
	cmds := []string{"configure"}
	for _, p := range in.Ports {
		cmds = append(cmds, "interface "+p, fmt.Sprintf("   tx-queue %d", in.Prio), "      no random-detect ecn", "      exit", "   exit")
	}
	return append(cmds, "no platform trident mmu queue-profile "+strings.ToLower(profileName), "end")
}

// fraction writes a dynamic threshold as 1/n or n.
func fraction(f float64) string {
	if f >= 1 {
		return fmt.Sprintf("%g", math.Round(f*100)/100)
	}
	return fmt.Sprintf("1/%d", int(math.Round(1/f)))
}

// nxos is Cisco NX-OS (Nexus 9000): network-qos pause buffers and a
// queuing policy with ECN WRED and a dynamic queue limit.
type nxos struct{}

func (nxos) Name() string { return "nxos" }

func (nxos) Apply(in Intent) ([]string, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	// NX-OS's dynamic queue limit is an index 0..10 of the fraction of
	// free buffer (1/128 .. 8, doubling).
	dyn := min(max(int(math.Round(math.Log2(in.alphaFrac())))+7, 0), 10)
	xoff := in.bytes(in.W.Headroom)
	cmds := []string{"configure terminal",
		"policy-map type network-qos bytetuning-nq",
		fmt.Sprintf("  class type network-qos c-8q-nq%d", in.Prio),
		fmt.Sprintf("    pause pfc-cos %d buffer-size %d pause-threshold %d resume-threshold %d", in.Prio, 2*xoff, xoff, xoff-min(xoff, 8*in.Cell)),
		"    mtu 9216",
		"policy-map type queuing bytetuning-out",
		fmt.Sprintf("  class type queuing c-out-8q-q%d", in.Prio),
		fmt.Sprintf("    random-detect minimum-threshold %d bytes maximum-threshold %d bytes drop-probability %d weight 0 ecn",
			in.bytes(in.W.Kmin), in.bytes(in.W.Kmax), int(math.Round(in.W.Pmax))),
		fmt.Sprintf("    queue-limit dynamic %d", dyn),
		"system qos",
		"  service-policy type network-qos bytetuning-nq"}
	for _, p := range in.Ports {
		cmds = append(cmds, "interface "+p, "  priority-flow-control mode on", "  service-policy type queuing output bytetuning-out")
	}
	return append(cmds, "end", "copy running-config startup-config"), nil
}

func (nxos) Undo(in Intent) []string {
	cmds := []string{"configure terminal"}
	for _, p := range in.Ports {
		cmds = append(cmds, "interface "+p, "  no service-policy type queuing output bytetuning-out")
	}
	return append(cmds, "system qos", "  no service-policy type network-qos bytetuning-nq", "end")
}

// vrp is Huawei VRP (CloudEngine): a drop profile with ECN and the DCB
// PFC buffer thresholds in cells.
type vrp struct{}

func (vrp) Name() string { return "vrp" }

func (vrp) Apply(in Intent) ([]string, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	cmds := []string{"system-view",
		"drop-profile " + strings.ToLower(profileName),
		fmt.Sprintf(" color green low-limit %d high-limit %d discard-percentage %d", in.W.Kmin, in.W.Kmax, int(math.Round(in.W.Pmax))),
		" quit",
		"dcb pfc",
		fmt.Sprintf(" priority %d", in.Prio),
		" quit"}
	for _, p := range in.Ports {
		cmds = append(cmds, "interface "+p,
			" dcb pfc enable mode manual",
			fmt.Sprintf(" dcb pfc buffer %d xoff dynamic %d hdrm %d cells", in.Prio, max(int(math.Round(in.W.Alpha)), 1), in.W.Headroom),
			fmt.Sprintf(" qos queue %d wred %s", in.Prio, strings.ToLower(profileName)),
			fmt.Sprintf(" qos queue %d ecn", in.Prio),
			" quit")
	}
	return append(cmds, "commit", "return"), nil
}

func (vrp) Undo(in Intent) []string {
	cmds := []string{"system-view"}
	for _, p := range in.Ports {
		cmds = append(cmds, "interface "+p, fmt.Sprintf(" undo qos queue %d wred", in.Prio), fmt.Sprintf(" undo dcb pfc buffer %d", in.Prio), " quit")
	}
	return append(cmds, "undo drop-profile "+strings.ToLower(profileName), "commit", "return")
}

// comware is H3C Comware (what the authors' public code pushes): a WRED
// queue table with ECN and the PFC ingress buffer's dynamic threshold
// and headroom per 802.1p priority.
type comware struct{}

func (comware) Name() string { return "comware" }

func (comware) Apply(in Intent) ([]string, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	cmds := []string{"system-view",
		"qos wred queue table " + profileName,
		fmt.Sprintf(" queue %d drop-level 0 low-limit %d high-limit %d discard-probability %d", in.Prio, in.W.Kmin, in.W.Kmax, int(math.Round(in.W.Pmax))),
		fmt.Sprintf(" queue %d ecn", in.Prio),
		" quit"}
	for _, p := range in.Ports {
		cmds = append(cmds, "interface "+p,
			" qos wred apply "+profileName,
			" priority-flow-control enable",
			fmt.Sprintf(" priority-flow-control no-drop dot1p %d", in.Prio),
			fmt.Sprintf(" priority-flow-control dot1p %d headroom %d", in.Prio, in.W.Headroom),
			fmt.Sprintf(" priority-flow-control dot1p %d ingress-buffer dynamic %d", in.Prio, max(int(math.Round(in.W.Alpha)), 1)),
			" quit")
	}
	return append(cmds, "return", "save force"), nil
}

func (comware) Undo(in Intent) []string {
	cmds := []string{"system-view"}
	for _, p := range in.Ports {
		cmds = append(cmds, "interface "+p, " undo qos wred apply "+profileName,
			fmt.Sprintf(" undo priority-flow-control dot1p %d headroom", in.Prio),
			fmt.Sprintf(" undo priority-flow-control dot1p %d ingress-buffer", in.Prio), " quit")
	}
	return append(cmds, "undo qos wred queue table "+profileName, "return")
}
