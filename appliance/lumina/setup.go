package lumina

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// A Plan is what Lumina's orchestrator does to the machines of a test
// before traffic (host.py's config_traffic_gen and config_packet_capture,
// switch.py's run_switch), as commands for an Executor: assign the
// ip-list, trust DSCP and map it to priorities (mlnx_qos on ConnectX,
// lldptool on E810), write the RoCE/DCQCN/CNP knobs (mlx5's sysfs and
// ROCE_ACCL register, irdma's configfs), start the injector under the
// switch's sde-path and the dumpers on the mirror servers.
//
// Every command is an argv, never a shell line built from the file: the
// SSH executor quotes each argument, and the few commands that need a
// shell (writing sysfs, starting a daemon in the background) run a fixed
// script that takes the file's values as positional parameters, so no
// value is ever parsed by a shell. Each step that changes a host first
// reads what it changes, so Execute can put it back when a later step
// fails and Teardown when the test is over.
type Plan struct {
	Steps []Step
}

// Step is one command on one machine.
type Step struct {
	// Host is the machine's role in the test file (requester, switch,
	// ...); Access how to reach it.
	Host   string
	Access Access
	// Why says what the step is for, as the dry run prints it.
	Why  string
	Argv []string
	// Save, when set, reads the state Argv changes; it runs first and
	// its output goes to Restore.
	Save []string
	// Check, when set, tells whether Save's output can be put back: a
	// step whose state cannot be read well enough to restore it is not
	// run, so nothing is changed that could not be undone.
	Check func(saved []byte) error
	// Restore returns the commands that undo Argv, given Save's output
	// and Argv's (a daemon's PID); nil when there is nothing to undo.
	Restore func(saved, out []byte) [][]string
	// RestoreWhat describes Restore for the dry run.
	RestoreWhat string
	// ID names the step's output for a later step's Fill.
	ID string
	// Fill, when set, makes the command from earlier steps' outputs (by
	// ID) when the step runs; Argv is then what the dry run prints.
	Fill func(outs map[string][]byte) ([]string, error)
}

// Applied is a plan as far as it ran: the steps that ran, with what
// their Save and Argv printed, so they can be undone.
type Applied struct {
	steps []appliedStep
}

type appliedStep struct {
	step       *Step
	saved, out []byte
}

// Execute runs the plan's steps in order. A step that fails stops the
// plan; the steps already run are undone in reverse order and the error
// names the machine and the step.
func (pl *Plan) Execute(ctx context.Context, ex Executor) (*Applied, error) {
	a := &Applied{}
	outs := map[string][]byte{}
	for i := range pl.Steps {
		st := &pl.Steps[i]
		argv := st.Argv
		if st.Fill != nil {
			var err error
			if argv, err = st.Fill(outs); err != nil {
				return a, errors.Join(step(st.Host, st.Why, err), a.Teardown(ctx, ex))
			}
		}
		var saved []byte
		if len(st.Save) > 0 {
			var err error
			if saved, err = ex.Run(ctx, st.Access, st.Save); err != nil {
				return a, errors.Join(step(st.Host, "reading the state before: "+st.Why, err), a.Teardown(ctx, ex))
			}
		}
		if st.Check != nil {
			if err := st.Check(saved); err != nil {
				return a, errors.Join(step(st.Host, "reading the state before: "+st.Why, err), a.Teardown(ctx, ex))
			}
		}
		out, err := ex.Run(ctx, st.Access, argv)
		if err != nil {
			return a, errors.Join(step(st.Host, st.Why, err), a.Teardown(ctx, ex))
		}
		if st.ID != "" {
			outs[st.ID] = out
		}
		a.steps = append(a.steps, appliedStep{st, saved, out})
	}
	return a, nil
}

// Teardown undoes the applied steps in reverse order, each restore
// attempted even when an earlier one failed; it leaves nothing to undo.
func (a *Applied) Teardown(ctx context.Context, ex Executor) error {
	if a == nil {
		return nil
	}
	var errs []error
	for i := len(a.steps) - 1; i >= 0; i-- {
		s := a.steps[i]
		if s.step.Restore == nil {
			continue
		}
		for _, argv := range s.step.Restore(s.saved, s.out) {
			if _, err := ex.Run(context.WithoutCancel(ctx), s.step.Access, argv); err != nil {
				errs = append(errs, step(s.step.Host, "restoring after: "+s.step.Why, err))
			}
		}
	}
	a.steps = nil
	return errors.Join(errs...)
}

// WriteDry prints the plan per step: the machine, the command as the SSH
// executor sends it (quoted), what it reads first and how it is undone.
func (pl *Plan) WriteDry(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, st := range pl.Steps {
		fmt.Fprintf(bw, "%s (%s): %s\n", st.Host, st.Access.ControlIP, st.Why)
		if len(st.Save) > 0 {
			fmt.Fprintf(bw, "  save:    %s\n", shellJoin(st.Save))
		}
		fmt.Fprintf(bw, "  run:     %s\n", shellJoin(st.Argv))
		if st.RestoreWhat != "" {
			fmt.Fprintf(bw, "  restore: %s\n", st.RestoreWhat)
		}
	}
	return bw.Flush()
}

// SetupOptions are the parts of a plan the test file does not name.
type SetupOptions struct {
	// Binary is the appliance binary on the machines (default
	// "appliance"); DumperPort the dumpers' HTTP port (default 9200).
	Binary     string
	DumperPort int
	// InjectorFile is an injector file already on the switch (inject.Spec
	// with the Tofino keys), used as it is. Empty, the plan writes one
	// from the test to <switch workspace>/injector.yml, as Lumina's
	// orchestrator writes its switch config, and restores that path after.
	InjectorFile string
	// Program is the P4 program switchd loads (default "injector",
	// p4/luminatofino's).
	Program string
	// IterMode is the injector's ITER rule, written into the injector
	// file (the test file has no key for it).
	IterMode intent.IterMode
	// RemoteTokenFile is the path, on the switch and the mirror servers,
	// of the bearer token file the injector's and the dumpers' control
	// APIs are started with (--token-file): they listen on their
	// control-ip, off loopback, and take changes only with the token the
	// orchestrator sends (its own --token-file, the same token).
	RemoteTokenFile string
	// DumperDPDK starts the dumpers on DPDK ports as Lumina's roce-pkt-dump
	// runs (eal:<pci-addr>, four queues on cores of the NIC's NUMA node):
	// Intel NICs (E810, XL710) are bound to their DPDK driver (vfio-pci,
	// igb_uio) first and back to the driver they had after; ConnectX NICs
	// stay on mlx5, whose DPDK driver works beside the kernel's. It needs
	// the appliance built with -tags dpdk on the mirror servers. Without
	// it the dumpers capture on afpacket:<if-name>.
	DumperDPDK bool
}

// Check refuses options the plan cannot run with: the services it
// starts listen off loopback, so they need a token file (an absolute
// path of plain characters, passed as it is); DPDK dumpers need each
// mirror NIC's pci-addr.
func (o SetupOptions) Check(t *Test) error {
	if o.RemoteTokenFile == "" {
		return errors.New("lumina setup: the injector and the dumpers listen on their control-ip and take changes only with a bearer token: " +
			"give --remote-token-file, the path of the token file on the switch and the mirror servers (the token of --token-file)")
	}
	if !path.IsAbs(o.RemoteTokenFile) || !tokenPathRE.MatchString(o.RemoteTokenFile) {
		return fmt.Errorf("lumina setup: remote token file %q: want an absolute path of letters, digits and ._-/", o.RemoteTokenFile)
	}
	if o.DumperDPDK {
		for _, m := range []struct {
			key string
			m   MirrorSpec
		}{{"requester-mirror", t.Spec.RequesterMirror}, {"responder-mirror", t.Spec.ResponderMirror}} {
			if m.m.NIC.PCIAddr == "" {
				e := &spec.Error{Key: m.key + ".nic.pci-addr", Msg: "a DPDK dumper (--dumper-dpdk) needs the NIC's PCI address"}
				if t.Doc != nil {
					e.File, e.Line = t.Doc.File, t.Doc.Line(m.key+".nic")
				}
				return e
			}
		}
	}
	return nil
}

var tokenPathRE = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// dumperQueues is how many receive queues, one core each, a DPDK dumper
// takes: Lumina's roce-pkt-dump runs on four lcores of the NIC's NUMA node.
const dumperQueues = 4

// mirrorDPDKDriver is the DPDK driver Lumina binds an Intel mirror NIC to.
var mirrorDPDKDriver = map[string]string{"E810": "vfio-pci", "XL710": "igb_uio"}

// sysfsWrite is the fixed script that writes $1 into each file named
// after it: config values reach it as positional parameters only.
const sysfsWrite = `v=$1; shift; for f do printf '%s\n' "$v" > "$f" || exit 1; done`

// background starts "$@" detached with its output in $1 and prints its
// PID, which the teardown kills.
const background = `log=$1; shift; nohup "$@" > "$log" 2>&1 < /dev/null & echo $!`

func writeArgv(value string, files ...string) []string {
	return append([]string{"sudo", "sh", "-c", sysfsWrite, "lumina-write", value}, files...)
}

// restoreFiles writes back what `cat FILES` printed, one value per file.
func restoreFiles(files []string) func(saved, _ []byte) [][]string {
	return func(saved, _ []byte) [][]string {
		vals := strings.Fields(string(saved))
		if len(vals) != len(files) {
			return nil
		}
		var out [][]string
		for i, f := range files {
			out = append(out, writeArgv(vals[i], f))
		}
		return out
	}
}

func b2i(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// BuildPlan turns a validated test into its setup plan.
func BuildPlan(t *Test, o SetupOptions) *Plan {
	s := &t.Spec
	if o.Binary == "" {
		o.Binary = "appliance"
	}
	if o.DumperPort == 0 {
		o.DumperPort = 9200
	}
	if o.Program == "" {
		o.Program = "injector"
	}
	generate := o.InjectorFile == ""
	if generate {
		o.InjectorFile = path.Join(s.Switch.Workspace, "injector.yml")
	}
	pl := &Plan{}
	for _, h := range []struct {
		role string
		h    HostSpec
	}{{"requester", s.Requester}, {"responder", s.Responder}} {
		pl.hostSteps(h.role, h.h)
	}
	for _, m := range []struct {
		role string
		m    MirrorSpec
	}{{"requester-mirror", s.RequesterMirror}, {"responder-mirror", s.ResponderMirror}} {
		pl.mirrorSteps(m.role, m.m, s.RewriteUDPDstPort, o)
	}
	if generate {
		for _, h := range []struct {
			role string
			h    HostSpec
		}{{"requester", s.Requester}, {"responder", s.Responder}} {
			pl.add(readMACStep(h.role, h.h.Access.login(), h.h.NIC.IfName))
		}
		pl.injectorFileStep(t, s.Switch.access(), o.InjectorFile, o.IterMode)
	}
	pl.switchSteps(s, o)
	return pl
}

func (pl *Plan) add(st Step) { pl.Steps = append(pl.Steps, st) }

// login is how the plan reaches a machine: its commands name their paths,
// so they run in the login directory rather than a workspace that may
// not exist yet.
func (a Access) login() Access {
	return Access{ControlIP: a.ControlIP, Username: a.Username, SSHKeyFilepath: a.SSHKeyFilepath}
}

func (sw SwitchSpec) access() Access {
	return Access{ControlIP: sw.ControlIP, Username: sw.Username, SSHKeyFilepath: sw.SSHKeyFilepath}
}

// hostSteps configure an RDMA host as host.py's config_traffic_gen does.
func (pl *Plan) hostSteps(role string, h HostSpec) {
	acc := h.Access.login()
	dev := h.NIC.IfName
	// Lumina flushes the NIC's addresses and assigns the ip-list with
	// its prefixes; the addresses it had come back at teardown.
	pl.add(Step{Host: role, Access: acc, Why: "flush " + dev + "'s addresses",
		Save: []string{"ip", "-o", "addr", "show", "dev", dev}, Argv: []string{"sudo", "ip", "addr", "flush", "dev", dev},
		Restore: func(saved, _ []byte) [][]string {
			out := [][]string{{"sudo", "ip", "addr", "flush", "dev", dev}}
			for _, p := range parseIPAddrShow(saved) {
				out = append(out, []string{"sudo", "ip", "addr", "add", p, "dev", dev})
			}
			return out
		}, RestoreWhat: "flush, then add back the addresses it had"})
	for _, p := range h.NIC.Prefixes() {
		pl.add(Step{Host: role, Access: acc, Why: "assign " + p.String() + " (ip-list)",
			Argv: []string{"sudo", "ip", "addr", "replace", p.String(), "dev", dev}})
	}
	if strings.ToUpper(h.NIC.Type) == "E810" {
		pl.intelSteps(role, acc, h)
		return
	}
	pl.mlnxSteps(role, acc, h)
}

// mlnxSteps: trust=dscp, the DSCP map and ETS with mlnx_qos; DCQCN and
// CNP pacing in sysfs; adaptive retransmission and slow restart in the
// ROCE_ACCL register.
func (pl *Plan) mlnxSteps(role string, acc Access, h HostSpec) {
	dev, pci := h.NIC.IfName, h.NIC.PCIAddr
	pl.add(Step{Host: role, Access: acc, Why: "trust DSCP on " + dev,
		Save: []string{"sudo", "mlnx_qos", "-i", dev}, Argv: []string{"sudo", "mlnx_qos", "-i", dev, "--trust=dscp"},
		Restore: func(saved, _ []byte) [][]string {
			q := parseMlnxQos(saved)
			var out [][]string
			if q.trust != "" {
				out = append(out, []string{"sudo", "mlnx_qos", "-i", dev, "--trust=" + q.trust})
			}
			for _, m := range q.dscp2prio {
				out = append(out, []string{"sudo", "mlnx_qos", "-i", dev, fmt.Sprintf("--dscp2prio=set,%d,%d", m.DSCP, m.Prio)})
			}
			return out
		}, RestoreWhat: "the trust state and DSCP map mlnx_qos showed before"})
	for _, m := range h.NIC.DSCPToPrio() {
		pl.add(Step{Host: role, Access: acc, Why: fmt.Sprintf("DSCP %d -> priority %d", m.DSCP, m.Prio),
			Argv: []string{"sudo", "mlnx_qos", "-i", dev, fmt.Sprintf("--dscp2prio=set,%d,%d", m.DSCP, m.Prio)}})
	}
	// Lumina's fair sharing: priority p in TC p, ETS with equal weights.
	pl.add(Step{Host: role, Access: acc, Why: "ETS across the eight traffic classes",
		Save:  []string{"sudo", "mlnx_qos", "-i", dev},
		Argv:  []string{"sudo", "mlnx_qos", "-i", dev, "-p", "0,1,2,3,4,5,6,7", "-s", "ets,ets,ets,ets,ets,ets,ets,ets", "-t", "12,13,12,13,12,13,12,13"},
		Check: func(saved []byte) error { _, err := parseMlnxETS(saved); return err },
		Restore: func(saved, _ []byte) [][]string {
			if e, err := parseMlnxETS(saved); err == nil {
				return [][]string{e.mlnxQosArgv(dev)}
			}
			return nil
		}, RestoreWhat: "the priority-to-TC map, TSA and bandwidths mlnx_qos showed before"})
	rp := h.RoCEParameters
	ecn := "/sys/class/net/" + dev + "/ecn/"
	sysfs := func(why, value string, files ...string) {
		pl.add(Step{Host: role, Access: acc, Why: why, Save: append([]string{"cat"}, files...), Argv: writeArgv(value, files...),
			Restore: restoreFiles(files), RestoreWhat: "the values cat printed"})
	}
	sysfs("min-time-between-cnps", strconv.Itoa(rp.MinTimeBetweenCNPs), ecn+"roce_np/min_time_between_cnps")
	// roce_rp/enable/* and roce_np/enable/* are per priority; Lumina
	// writes them all.
	var rpFiles, npFiles []string
	for p := 0; p < 8; p++ {
		rpFiles = append(rpFiles, fmt.Sprintf("%sroce_rp/enable/%d", ecn, p))
		npFiles = append(npFiles, fmt.Sprintf("%sroce_np/enable/%d", ecn, p))
	}
	sysfs("dcqcn-rp-enable", b2i(rp.DCQCNRPEnable), rpFiles...)
	sysfs("dcqcn-np-enable", b2i(rp.DCQCNNPEnable), npFiles...)
	reg := []string{"sudo", "mlxreg", "-d", pci, "--reg_name", "ROCE_ACCL"}
	for _, f := range []struct{ key, field, v string }{
		{"adaptive-retrans", "roce_adp_retrans_en", b2i(rp.AdaptiveRetrans)},
		{"slow-restart", "roce_slow_restart_en", b2i(rp.SlowRestart)},
	} {
		field := f.field
		pl.add(Step{Host: role, Access: acc, Why: f.key + " (ROCE_ACCL." + field + ")",
			Save: append(append([]string(nil), reg...), "--get"), Argv: append(append([]string(nil), reg...), "--set", field+"="+f.v, "--yes"),
			Restore: func(saved, _ []byte) [][]string {
				v, ok := parseMlxreg(saved)[field]
				if !ok {
					return nil
				}
				return [][]string{append(append([]string(nil), reg...), "--set", field+"="+v, "--yes")}
			}, RestoreWhat: "the field's value mlxreg --get showed"})
	}
}

// intelSteps: the E810's DSCP map with lldptool (the firmware's LLDP
// agent off, as Lumina does; DSCP 0..31 only) and DCQCN through irdma's
// configfs.
func (pl *Plan) intelSteps(role string, acc Access, h HostSpec) {
	dev, ib := h.NIC.IfName, h.NIC.IBDevice
	pl.add(Step{Host: role, Access: acc, Why: "firmware LLDP agent off on " + dev,
		Save: []string{"ethtool", "--show-priv-flags", dev}, Argv: []string{"sudo", "ethtool", "--set-priv-flags", dev, "fw-lldp-agent", "off"},
		Restore: func(saved, _ []byte) [][]string {
			if on := regexp.MustCompile(`(?m)^fw-lldp-agent\s*:\s*on`).Match(saved); on {
				return [][]string{{"sudo", "ethtool", "--set-priv-flags", dev, "fw-lldp-agent", "on"}}
			}
			return nil
		}, RestoreWhat: "the agent back on if it was"})
	var added []DSCPPrio
	for _, m := range h.NIC.DSCPToPrio() {
		if m.DSCP > 31 {
			continue // the E810 maps DSCP 0..31 only
		}
		added = append(added, m)
	}
	pl.add(Step{Host: role, Access: acc, Why: "ETS: priorities to four traffic classes",
		Save: []string{"sudo", "lldptool", "-t", "-i", dev, "-V", "ETS-CFG", "-c", "willing", "up2tc", "tsa", "tcbw"},
		Argv: []string{"sudo", "lldptool", "-Ti", dev, "-V", "ETS-CFG", "willing=no", "up2tc=0:0,1:1,2:2,3:3,4:0,5:1,6:2,7:3",
			"tsa=0:ets,1:ets,2:ets,3:ets,4:strict,5:strict,6:strict,7:strict", "tcbw=25,25,25,25,0,0,0,0"},
		Check: func(saved []byte) error { _, err := parseLldpETS(saved); return err },
		Restore: func(saved, _ []byte) [][]string {
			if e, err := parseLldpETS(saved); err == nil {
				return [][]string{e.lldptoolArgv(dev)}
			}
			return nil
		}, RestoreWhat: "willing, up2tc, tsa and tcbw as lldptool showed them before"})
	pl.add(Step{Host: role, Access: acc, Why: "read the DSCP map before", Save: []string{"sudo", "lldptool", "-t", "-i", dev, "-V", "APP", "-c"},
		Argv: []string{"true"},
		Restore: func(saved, _ []byte) [][]string {
			had := map[DSCPPrio]bool{}
			for _, m := range parseLldpApp(saved) {
				had[m] = true
			}
			var out [][]string
			for _, m := range added {
				if !had[m] {
					out = append(out, []string{"sudo", "lldptool", "-T", "-i", dev, "-V", "APP", "-d", fmt.Sprintf("app=%d,5,%d", m.Prio, m.DSCP)})
				}
			}
			return out
		}, RestoreWhat: "remove the mappings the plan added"})
	for _, m := range added {
		pl.add(Step{Host: role, Access: acc, Why: fmt.Sprintf("DSCP %d -> priority %d", m.DSCP, m.Prio),
			Argv: []string{"sudo", "lldptool", "-T", "-i", dev, "-V", "APP", fmt.Sprintf("app=%d,5,%d", m.Prio, m.DSCP)}})
	}
	dir := "/sys/kernel/config/irdma/" + ib
	on := h.RoCEParameters.DCQCNEnable != nil && *h.RoCEParameters.DCQCNEnable
	pl.add(Step{Host: role, Access: acc, Why: "irdma configfs directory for " + ib, Argv: []string{"sudo", "mkdir", "-p", dir},
		Restore:     func(_, _ []byte) [][]string { return [][]string{{"sudo", "rmdir", dir}} },
		RestoreWhat: "rmdir it"})
	f := dir + "/roce_dcqcn_enable"
	pl.add(Step{Host: role, Access: acc, Why: "dcqcn-enable", Save: []string{"cat", f}, Argv: writeArgv(b2i(on), f),
		Restore: restoreFiles([]string{f}), RestoreWhat: "the value cat printed"})
	// irdma applies the settings when the directory goes away.
	pl.add(Step{Host: role, Access: acc, Why: "apply (rmdir the configfs directory)", Argv: []string{"sudo", "rmdir", dir},
		Restore:     func(_, _ []byte) [][]string { return [][]string{{"sudo", "mkdir", "-p", dir}} },
		RestoreWhat: "mkdir it again, for the restores before it"})
}

// mirrorSteps start a dumper on a mirror server's NIC.
func (pl *Plan) mirrorSteps(role string, m MirrorSpec, rewrite int, o SetupOptions) {
	acc := m.Access.login()
	dir := path.Join(m.Workspace, "pcap-result")
	pl.add(Step{Host: role, Access: acc, Why: "result directory", Argv: []string{"mkdir", "-p", dir}})
	pc := m.PktDumpConf
	port := []string{"--port", "afpacket:" + m.NIC.IfName}
	if o.DumperDPDK {
		pci := m.NIC.PCIAddr
		if strings.Count(pci, ":") == 1 {
			pci = "0000:" + pci // Lumina writes the address without its domain
		}
		if drv, ok := mirrorDPDKDriver[strings.ToUpper(m.NIC.Type)]; ok {
			pl.bindStep(role, acc, pci, drv)
		}
		port = []string{"--port", "eal:" + pci, "--queues", strconv.Itoa(dumperQueues), "--cores", "numa"}
	}
	argv := append([]string{"sh", "-c", background, "lumina-bg", path.Join(m.Workspace, "dumper.log"), o.Binary}, o.tokenArgs()...)
	argv = append(append(append(argv, "dump"), port...), "--name", role, "--dir", dir, "--file", pc.DumpFilename,
		"--snap-len", strconv.Itoa(pc.SnapLen), "--num-pkts", strconv.Itoa(pc.NumPkts),
		"--rewrite-port", strconv.Itoa(rewrite), "--listen", net.JoinHostPort(m.ControlIP, strconv.Itoa(o.DumperPort)))
	pl.add(Step{Host: role, Access: acc, Why: "start the dumper", Argv: argv, Restore: killPID(false), RestoreWhat: "SIGTERM the PID it printed"})
}

// tokenArgs are the global flags that give a remote service its token.
func (o SetupOptions) tokenArgs() []string {
	if o.RemoteTokenFile == "" {
		return nil
	}
	return []string{"--token-file", o.RemoteTokenFile}
}

// bindStep binds an Intel mirror NIC to its DPDK driver, as Lumina's
// MirrorHost.bind_dpdk does, after reading the driver it has, which the
// restore binds it back to (Lumina binds ice or i40e back by NIC type).
func (pl *Plan) bindStep(role string, acc Access, pci, drv string) {
	link := "/sys/bus/pci/devices/" + pci + "/driver"
	pl.add(Step{Host: role, Access: acc, Why: "bind " + pci + " to " + drv + " (DPDK)", Save: []string{"readlink", link},
		Argv: []string{"sudo", "dpdk-devbind.py", "-b", drv, pci},
		Check: func(saved []byte) error {
			if d := path.Base(strings.TrimSpace(string(saved))); !driverRE.MatchString(d) {
				return fmt.Errorf("%s: %q is not a driver name", link, d)
			}
			return nil
		},
		Restore: func(saved, _ []byte) [][]string {
			d := path.Base(strings.TrimSpace(string(saved)))
			if !driverRE.MatchString(d) || d == drv {
				return nil
			}
			return [][]string{{"sudo", "dpdk-devbind.py", "-b", d, pci}}
		},
		RestoreWhat: "bind it back to the driver readlink printed"})
}

// driverRE matches a kernel driver's name (ice, i40e, vfio-pci, mlx5_core).
var driverRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// switchSteps start switchd with the injector program from sde-path and
// the injector's control API, which loads the entries with bfshell.
func (pl *Plan) switchSteps(s *TestSpec, o SetupOptions) {
	sw := s.Switch
	acc := sw.access()
	sde := strings.TrimSuffix(sw.SDEPath, "/")
	pl.add(Step{Host: "switch", Access: acc, Why: "switchd with " + o.Program + " (sde-path)",
		Argv: []string{"sudo", "sh", "-c", background, "lumina-bg", path.Join(sw.Workspace, "switchd.log"),
			"env", "SDE=" + sde, "SDE_INSTALL=" + sde + "/install", sde + "/run_switchd.sh", "-p", o.Program},
		Restore: killPID(true), RestoreWhat: "kill the PID it printed"})
	argv := append([]string{"sh", "-c", background, "lumina-bg", path.Join(sw.Workspace, "injector.log"), o.Binary},
		o.tokenArgs()...)
	argv = append(argv, "inject", "tofino", "-f", o.InjectorFile, "--sde", sde,
		"--listen", net.JoinHostPort(sw.ControlIP, strconv.Itoa(sw.ListenPort)))
	pl.add(Step{Host: "switch", Access: acc, Why: "the injector's control API (bfshell under sde-path)", Argv: argv,
		Restore: killPID(false), RestoreWhat: "SIGTERM the PID it printed"})
}

var pidRE = regexp.MustCompile(`^[1-9][0-9]*$`)

func killPID(sudo bool) func(_, out []byte) [][]string {
	return func(_, out []byte) [][]string {
		pid := strings.TrimSpace(string(out))
		if !pidRE.MatchString(pid) {
			return nil
		}
		argv := []string{"kill", "-TERM", pid}
		if sudo {
			argv = append([]string{"sudo"}, argv...)
		}
		return [][]string{argv}
	}
}

// parseIPAddrShow reads the addresses of `ip -o addr show dev X`:
// "2: ens1    inet 10.0.0.1/24 brd 10.0.0.255 scope global ens1 ...".
// Link-local IPv6 addresses come back by themselves when the link does.
func parseIPAddrShow(b []byte) []string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" && f[i] != "inet6" {
				continue
			}
			p, err := ParseIPEntry(f[i+1])
			if err == nil && !p.Addr().IsLinkLocalUnicast() {
				out = append(out, p.String())
			}
			break
		}
	}
	return out
}

type mlnxQos struct {
	trust     string
	dscp2prio []DSCPPrio
}

var (
	trustRE = regexp.MustCompile(`(?m)^Priority trust state:\s*(pcp|dscp)\s*$`)
	prioRE  = regexp.MustCompile(`(?m)^\s*prio:\s*([0-7])\s+dscp:\s*([0-9,]+)`)
)

// parseMlnxQos reads the trust state and DSCP map from mlnx_qos -i DEV.
func parseMlnxQos(b []byte) mlnxQos {
	var q mlnxQos
	if m := trustRE.FindSubmatch(b); m != nil {
		q.trust = string(m[1])
	}
	for _, m := range prioRE.FindAllSubmatch(b, -1) {
		prio, _ := strconv.Atoi(string(m[1]))
		ds, err := ParseDSCPList(strings.TrimSuffix(string(m[2]), ","))
		if err != nil {
			continue
		}
		for _, d := range ds {
			q.dscp2prio = append(q.dscp2prio, DSCPPrio{DSCP: d, Prio: prio})
		}
	}
	return q
}

var mlxregRE = regexp.MustCompile(`(?m)^\s*([a-z_0-9]+)\s*\|\s*(0x[0-9a-fA-F]+)\s*$`)

// parseMlxreg reads mlxreg --get's "field | 0x00000001" rows.
func parseMlxreg(b []byte) map[string]string {
	out := map[string]string{}
	for _, m := range mlxregRE.FindAllSubmatch(b, -1) {
		if v, err := strconv.ParseUint(string(m[2][2:]), 16, 32); err == nil {
			out[string(m[1])] = strconv.FormatUint(v, 10)
		}
	}
	return out
}

var lldpAppRE = regexp.MustCompile(`(?m)^\s*\d+:\((\d+),5,(\d+)\)\s+local\s+hw`)

// parseLldpApp reads lldptool's APP lines "0:(1,5,9) local  hw (set)":
// priority 1 for DSCP 9 (selector 5 is DSCP).
func parseLldpApp(b []byte) []DSCPPrio {
	var out []DSCPPrio
	for _, m := range lldpAppRE.FindAllSubmatch(bytes.TrimSpace(b), -1) {
		p, err1 := strconv.Atoi(string(m[1]))
		d, err2 := strconv.Atoi(string(m[2]))
		// A line that is not a DSCP mapping lldptool could have set is
		// not ours to restore.
		if err1 != nil || err2 != nil || p > 7 || d > 63 {
			continue
		}
		out = append(out, DSCPPrio{DSCP: d, Prio: p})
	}
	return out
}

// etsConf is a port's ETS configuration as a restore command takes it:
// each priority's traffic class, each class's transmission selection
// algorithm and bandwidth share (percent; 0 for a class that is not ETS).
type etsConf struct {
	willing string // lldptool only: yes or no
	up2tc   [8]int
	tsa     [8]string
	bw      [8]int
}

// valid holds a configuration to what the tools accept back: every class
// has an algorithm, ETS shares are 0..100 and sum to 100 when any class
// is ETS, other classes have none.
func (e *etsConf) valid() error {
	sum, ets := 0, false
	for tc := 0; tc < 8; tc++ {
		switch e.tsa[tc] {
		case "ets":
			ets = true
		case "strict", "vendor":
			if e.bw[tc] != 0 {
				return fmt.Errorf("tc %d is %s with a %d%% share", tc, e.tsa[tc], e.bw[tc])
			}
		default:
			return fmt.Errorf("no transmission selection for tc %d", tc)
		}
		if e.bw[tc] < 0 || e.bw[tc] > 100 {
			return fmt.Errorf("tc %d share %d%%", tc, e.bw[tc])
		}
		sum += e.bw[tc]
	}
	if ets && sum != 100 {
		return fmt.Errorf("ETS shares sum to %d%%", sum)
	}
	return nil
}

func joinInts(v []int, prefix bool) string {
	parts := make([]string, len(v))
	for i, x := range v {
		if prefix {
			parts[i] = fmt.Sprintf("%d:%d", i, x)
		} else {
			parts[i] = strconv.Itoa(x)
		}
	}
	return strings.Join(parts, ",")
}

// mlnxQosArgv puts the configuration back with mlnx_qos.
func (e *etsConf) mlnxQosArgv(dev string) []string {
	argv := []string{"sudo", "mlnx_qos", "-i", dev, "-p", joinInts(e.up2tc[:], false), "-s", strings.Join(e.tsa[:], ",")}
	if slices.Contains(e.tsa[:], "ets") {
		argv = append(argv, "-t", joinInts(e.bw[:], false))
	}
	return argv
}

// lldptoolArgv puts the configuration back with lldptool.
func (e *etsConf) lldptoolArgv(dev string) []string {
	tsa := make([]string, 8)
	for i, t := range e.tsa {
		tsa[i] = fmt.Sprintf("%d:%s", i, t)
	}
	return []string{"sudo", "lldptool", "-Ti", dev, "-V", "ETS-CFG", "willing=" + e.willing, "up2tc=" + joinInts(e.up2tc[:], true),
		"tsa=" + strings.Join(tsa, ","), "tcbw=" + joinInts(e.bw[:], false)}
}

var (
	mlnxTCRE   = regexp.MustCompile(`^tc:\s*([0-7])\s+ratelimit:[^,]*,\s*tsa:\s*(strict|ets|vendor)(?:,\s*bw:\s*(\d{1,3})%)?$`)
	mlnxPrioRE = regexp.MustCompile(`^priority:((?:\s+[0-7])+)$`)
)

// parseMlnxETS reads the traffic classes mlnx_qos -i DEV lists:
//
//	tc: 0 ratelimit: unlimited, tsa: ets, bw: 12%
//	         priority:  0
//
// It fails unless all eight classes and all eight priorities are there,
// each once, with shares mlnx_qos would take back.
func parseMlnxETS(b []byte) (etsConf, error) {
	var e etsConf
	var seenTC, seenPrio [8]bool
	tc := -1
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if m := mlnxTCRE.FindStringSubmatch(line); m != nil {
			tc = int(m[1][0] - '0')
			if seenTC[tc] {
				return e, fmt.Errorf("mlnx_qos lists tc %d twice", tc)
			}
			seenTC[tc] = true
			e.tsa[tc] = m[2]
			if m[3] != "" {
				e.bw[tc], _ = strconv.Atoi(m[3])
			}
			continue
		}
		if strings.HasPrefix(line, "tc:") {
			return e, fmt.Errorf("mlnx_qos: unreadable traffic class %q", line)
		}
		if m := mlnxPrioRE.FindStringSubmatch(line); m != nil && tc >= 0 {
			for _, f := range strings.Fields(m[1]) {
				p := int(f[0] - '0')
				if seenPrio[p] {
					return e, fmt.Errorf("mlnx_qos puts priority %d in two traffic classes", p)
				}
				seenPrio[p] = true
				e.up2tc[p] = tc
			}
		}
	}
	for i := 0; i < 8; i++ {
		if !seenTC[i] {
			return e, fmt.Errorf("mlnx_qos shows no tc %d: the ETS configuration cannot be restored", i)
		}
		if !seenPrio[i] {
			return e, fmt.Errorf("mlnx_qos shows priority %d in no traffic class: the ETS configuration cannot be restored", i)
		}
	}
	return e, e.valid()
}

var lldpETSRE = regexp.MustCompile(`^(willing|up2tc|tsa|tcbw)=(\S+)$`)

// parseLldpETS reads lldptool -t -V ETS-CFG -c willing up2tc tsa tcbw:
// "willing=yes", "up2tc=0:0,1:0,...", "tsa=0:ets,...", "tcbw=25,25,...".
// It fails unless all four are there, once, each covering the eight
// priorities or classes.
func parseLldpETS(b []byte) (etsConf, error) {
	var e etsConf
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		m := lldpETSRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		if seen[m[1]] {
			return e, fmt.Errorf("lldptool shows %s twice", m[1])
		}
		seen[m[1]] = true
		if m[1] == "willing" {
			if m[2] != "yes" && m[2] != "no" {
				return e, fmt.Errorf("lldptool willing=%s", m[2])
			}
			e.willing = m[2]
			continue
		}
		parts := strings.Split(m[2], ",")
		if len(parts) != 8 {
			return e, fmt.Errorf("lldptool %s=%s: want 8 entries", m[1], m[2])
		}
		switch m[1] {
		case "tcbw":
			for i, p := range parts {
				v, err := strconv.Atoi(p)
				if err != nil || v < 0 || v > 100 {
					return e, fmt.Errorf("lldptool tcbw=%s", m[2])
				}
				e.bw[i] = v
			}
		default:
			var got [8]bool
			for _, p := range parts {
				k, v, ok := strings.Cut(p, ":")
				if !ok || len(k) != 1 || k[0] < '0' || k[0] > '7' || got[k[0]-'0'] {
					return e, fmt.Errorf("lldptool %s=%s", m[1], m[2])
				}
				i := int(k[0] - '0')
				got[i] = true
				if m[1] == "tsa" {
					if v != "ets" && v != "strict" {
						return e, fmt.Errorf("lldptool %s=%s", m[1], m[2])
					}
					e.tsa[i] = v
				} else {
					if len(v) != 1 || v[0] < '0' || v[0] > '7' {
						return e, fmt.Errorf("lldptool %s=%s", m[1], m[2])
					}
					e.up2tc[i] = int(v[0] - '0')
				}
			}
		}
	}
	for _, k := range []string{"willing", "up2tc", "tsa", "tcbw"} {
		if !seen[k] {
			return e, fmt.Errorf("lldptool shows no %s: the ETS configuration cannot be restored", k)
		}
	}
	return e, e.valid()
}
