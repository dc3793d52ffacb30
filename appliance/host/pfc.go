package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// PFCECN is what could be read about one netdev's lossless settings.
type PFCECN struct {
	Netdev string `json:"netdev"`
	// PFC is the per-priority PFC state (index = priority), nil when no
	// source could read it; PFCFrom names the source.
	PFC     []bool `json:"pfc,omitempty"`
	PFCFrom string `json:"pfc_from,omitempty"`
	// ECN (DCQCN) per priority, notification point (receiver: CNPs) and
	// reaction point (sender: rate cuts), from mlx5's sysfs.
	ECNNotify []bool `json:"ecn_np,omitempty"`
	ECNReact  []bool `json:"ecn_rp,omitempty"`
	Trust     string `json:"trust,omitempty"` // pcp or dscp (mlx5 qos/trust)
	Pause     string `json:"pause,omitempty"` // global pause, from ethtool -a
	Errors    []string
}

// tools are what doctor would ask about PFC, in the order it asks them.
var tools = []struct{ name, pkg string }{
	{"dcb", "iproute2"},
	{"mlnx_qos", "MLNX_OFED or mstflint"},
	{"ethtool", "ethtool"},
}

// parseFlags8 finds eight 0/1 flags in s ("0,0,0,1,0,0,0,0", "0 0 0 1 0 0 0 0").
func parseFlags8(s string) []bool {
	fs := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	var out []bool
	for _, f := range fs {
		switch f {
		case "0":
			out = append(out, false)
		case "1":
			out = append(out, true)
		default:
			out = nil
			continue
		}
		if len(out) == 8 {
			return out
		}
	}
	return nil
}

// parseDCBPFC reads `dcb pfc show dev IF`: "... prio-pfc 0:off 1:off 2:off 3:on ...".
func parseDCBPFC(out string) []bool {
	fs := strings.Fields(out)
	for i, f := range fs {
		if f != "prio-pfc" {
			continue
		}
		res := make([]bool, 8)
		n := 0
		for _, kv := range fs[i+1:] {
			k, v, ok := strings.Cut(kv, ":")
			p, err := strconv.Atoi(k)
			if !ok || err != nil || p < 0 || p > 7 {
				break
			}
			res[p] = v == "on"
			n++
		}
		if n > 0 {
			return res
		}
	}
	return nil
}

// parseMlnxQos reads `mlnx_qos -i IF`: a "PFC configuration:" block with a
// line "enabled  0 0 0 1 0 0 0 0".
func parseMlnxQos(out string) []bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 9 && f[0] == "enabled" {
			return parseFlags8(strings.Join(f[1:], " "))
		}
	}
	return nil
}

// parseEthtoolPause reads `ethtool -a IF`: "RX: on" and "TX: on".
func parseEthtoolPause(out string) string {
	var rx, tx string
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "RX":
			rx = strings.TrimSpace(v)
		case "TX":
			tx = strings.TrimSpace(v)
		}
	}
	if rx == "" && tx == "" {
		return ""
	}
	return fmt.Sprintf("rx %s, tx %s", rx, tx)
}

func onPrios(flags []bool) string {
	var on []string
	for i, f := range flags {
		if f {
			on = append(on, strconv.Itoa(i))
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// ReadPFCECN reads a netdev's PFC, ECN, trust and pause settings from sysfs
// (mlx5's qos/ and ecn/ directories) and from the tools that are installed;
// missing lists the tools that are not.
func (h *Host) ReadPFCECN(ctx context.Context, netdev string) (s PFCECN, missing []string) {
	s.Netdev = netdev
	base := h.sys("class/net", netdev)
	if v, ok := readString(base + "/qos/pfc"); ok {
		if f := parseFlags8(v); f != nil {
			s.PFC, s.PFCFrom = f, "sysfs qos/pfc"
		}
	}
	if v, ok := readString(base + "/qos/trust"); ok {
		s.Trust = v
	}
	readECN := func(dir string) []bool {
		if len(dirNames(filepath.Join(base, "ecn", dir, "enable"))) == 0 {
			return nil
		}
		out := make([]bool, 8)
		for p := range 8 {
			v, _ := readInt(filepath.Join(base, "ecn", dir, "enable", strconv.Itoa(p)))
			out[p] = v == 1
		}
		return out
	}
	s.ECNNotify, s.ECNReact = readECN("roce_np"), readECN("roce_rp")
	for _, t := range tools {
		if _, err := h.LookPath(t.name); err != nil {
			missing = append(missing, t.name)
			continue
		}
		switch t.name {
		case "dcb":
			out, err := h.Run(ctx, "dcb", "pfc", "show", "dev", netdev)
			if f := parseDCBPFC(string(out)); err == nil && f != nil {
				if s.PFC == nil {
					s.PFC, s.PFCFrom = f, "dcb"
				}
			} else {
				s.Errors = append(s.Errors, fmt.Sprintf("dcb pfc show dev %s: %s", netdev, errText(out, err)))
			}
		case "mlnx_qos":
			out, err := h.Run(ctx, "mlnx_qos", "-i", netdev)
			if f := parseMlnxQos(string(out)); err == nil && f != nil {
				if s.PFC == nil {
					s.PFC, s.PFCFrom = f, "mlnx_qos"
				}
				if s.Trust == "" {
					for _, line := range strings.Split(string(out), "\n") {
						if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Priority trust state:"); ok {
							s.Trust = strings.TrimSpace(v)
						}
					}
				}
			} else {
				s.Errors = append(s.Errors, fmt.Sprintf("mlnx_qos -i %s: %s", netdev, errText(out, err)))
			}
		case "ethtool":
			out, err := h.Run(ctx, "ethtool", "-a", netdev)
			if p := parseEthtoolPause(string(out)); err == nil && p != "" {
				s.Pause = p
			} else {
				s.Errors = append(s.Errors, fmt.Sprintf("ethtool -a %s: %s", netdev, errText(out, err)))
			}
		}
	}
	return s, missing
}

func errText(out []byte, err error) string {
	if l := firstLine(out); l != "" {
		return l
	}
	if err != nil {
		return err.Error()
	}
	return "nothing it could read"
}

// CheckPFCECN reads the lossless settings of the RDMA netdevs (or, without
// any, of the device-backed netdevs): RoCE without PFC on its priority drops
// under congestion and falls back to go-back-N, and DCQCN needs ECN on the
// same priority. It warns, never fails: lossy RoCE is a deliberate choice on
// some fabrics, and many NICs expose these settings only through vendor tools.
func (h *Host) CheckPFCECN(ctx context.Context) Result {
	var r Result
	r.set(OK)
	var targets []string
	for _, d := range h.RDMADevices() {
		targets = append(targets, d.Netdevs...)
	}
	what := "RDMA netdevs"
	if len(targets) == 0 {
		for _, d := range physical() {
			targets = append(targets, d.Name)
		}
		what = "device-backed netdevs (no RDMA netdev)"
	}
	if len(targets) == 0 {
		r.set(Warn)
		r.detail("no netdev to check")
		return r
	}
	r.detail("checking the %s: %s", what, strings.Join(targets, ", "))
	var missing []string
	for _, nd := range targets {
		s, miss := h.ReadPFCECN(ctx, nd)
		missing = miss
		switch {
		case s.PFC == nil:
			r.set(Warn)
			r.detail("%s: PFC unreadable", nd)
		case onPrios(s.PFC) == "none":
			r.set(Warn)
			r.detail("%s: PFC off on every priority (from %s): RoCE traffic is lossy", nd, s.PFCFrom)
			r.fix("turn PFC on for the RoCE priority (3 here as an example): dcb pfc set dev %s prio-pfc 3:on, or mlnx_qos -i %s --pfc 0,0,0,1,0,0,0,0", nd, nd)
		default:
			r.detail("%s: PFC on priorities %s (from %s)", nd, onPrios(s.PFC), s.PFCFrom)
		}
		if s.Trust != "" {
			r.detail("%s: trust %s", nd, s.Trust)
		}
		switch {
		case s.ECNNotify == nil && s.ECNReact == nil:
			r.detail("%s: ECN (DCQCN) settings unreadable: no %s", nd, h.sys("class/net", nd, "ecn"))
		case onPrios(s.ECNNotify) == "none" || onPrios(s.ECNReact) == "none":
			r.set(Warn)
			r.detail("%s: DCQCN off: ECN notification on priorities %s, reaction on %s", nd, onPrios(s.ECNNotify), onPrios(s.ECNReact))
			r.fix("echo 1 > %s/ecn/roce_np/enable/3 and roce_rp/enable/3 (the RoCE priority)", h.sys("class/net", nd))
		default:
			r.detail("%s: DCQCN ECN notification on priorities %s, reaction on %s", nd, onPrios(s.ECNNotify), onPrios(s.ECNReact))
		}
		if s.Pause != "" {
			r.detail("%s: global pause %s", nd, s.Pause)
		}
		for _, e := range s.Errors {
			r.detail("%s", e)
		}
	}
	if len(missing) > 0 {
		var how []string
		for _, t := range tools {
			for _, m := range missing {
				if m == t.name {
					how = append(how, fmt.Sprintf("%s (%s)", t.name, t.pkg))
				}
			}
		}
		r.detail("tools not installed: %s", strings.Join(how, ", "))
		if r.Status != OK {
			r.fix("install the missing tools to read more: %s", strings.Join(how, ", "))
		}
	}
	return r
}
