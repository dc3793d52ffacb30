package lumina

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/dumper"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// Executor runs a command on one machine of a test and returns its
// standard output.
type Executor interface {
	Run(ctx context.Context, host Access, argv []string) ([]byte, error)
}

// SSH runs commands over the ssh client with the test's username and key,
// in the machine's workspace, in batch mode (no password prompts: a key
// that does not work is an error, not a hang).
type SSH struct{}

var _ Executor = SSH{}

// Run implements Executor.
func (SSH) Run(ctx context.Context, h Access, argv []string) ([]byte, error) {
	args, err := sshArgs(h, argv)
	if err != nil {
		return nil, err
	}
	target := args[len(args)-2]
	c := exec.CommandContext(ctx, "ssh", args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return out, fmt.Errorf("ssh %s: %w: %s", target, err, strings.TrimSpace(lastLines(stderr.String(), 5)))
	}
	return out, nil
}

// sshArgs is ssh's command line for argv on h: options, "--", the
// target and the command, each argument of argv quoted for the remote
// shell.
func sshArgs(h Access, argv []string) ([]string, error) {
	if h.ControlIP == "" {
		return nil, errors.New("no control-ip")
	}
	// The spec's loader checks these too; an Access from elsewhere must
	// not become an ssh option ("-oProxyCommand=...") either.
	if !ValidHost(h.ControlIP) {
		return nil, fmt.Errorf("control-ip %q: an IP address or a host name", h.ControlIP)
	}
	if h.Username != "" && !ValidUser(h.Username) {
		return nil, fmt.Errorf("username %q: a user name", h.Username)
	}
	args := []string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=10"}
	if h.SSHKeyFilepath != "" {
		args = append(args, "-i", expandHome(h.SSHKeyFilepath))
	}
	target := h.ControlIP
	if h.Username != "" {
		target = h.Username + "@" + target
	}
	cmd := shellJoin(argv)
	if h.Workspace != "" {
		cmd = "cd " + shellQuote(h.Workspace) + " && " + cmd
	}
	// "--": whatever the target is, ssh takes no option after it.
	return append(args, "--", target, cmd), nil
}

// ValidHost reports whether s is an IP address or a DNS host name
// (RFC 1123 labels): what may follow ssh's "--" and go into a URL.
func ValidHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// ValidUser reports whether s is a plain user name (as useradd takes).
func ValidUser(s string) bool {
	return len(s) > 0 && len(s) <= 32 && s[0] != '-' && plain(s)
}

// ValidIBDevice reports whether s is an RDMA device name as the kernel
// makes them (mlx5_0, rxe0, irdma-eth1): it becomes a sysfs path on the
// host.
func ValidIBDevice(s string) bool {
	return len(s) > 0 && len(s) <= 64 && s != "." && s != ".." && s[0] != '-' && plain(s)
}

func plain(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}) < 0
}

// dumpPath is where a dumper's file is kept: the name is the dumper's
// word, so it must be a plain local name, never a path out of dir.
func dumpPath(dir, mirror, name string) (string, error) {
	if !filepath.IsLocal(name) || name == "." || filepath.Base(name) != name || strings.ContainsAny(name, "\\/") ||
		strings.IndexFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return "", fmt.Errorf("dumper %s names a file %q: want a plain file name", mirror, name)
	}
	return filepath.Join(dir, "dumps", mirror+"-"+name), nil
}

func expandHome(p string) string {
	if strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, p[2:])
		}
	}
	return p
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// Remote says how a test reaches its machines when it does not run in the
// lab: the software injector's HTTP API on the switch's control-ip and
// listen-port, each dumper's on its control-ip and DumperPort, and the
// traffic generator's two sides started through Exec on the requester and
// the responder (`appliance lumina trafficgen`), which exchange their
// metadata over TCP between the hosts' control-ips. A Tofino answers the
// same API through `appliance inject tofino` (p4/luminatofino.Controller).
type Remote struct {
	Exec Executor
	// SetupOptions are the plan's (BuildPlan) and say where the services
	// answer: Binary (default "appliance"), DumperPort (default 9200),
	// InjectorFile, RemoteTokenFile, DumperDPDK. IterMode is the run's.
	SetupOptions
	// HostArgs are extra device flags for the traffic generator on each
	// host; by default the RNIC is nic.ib-device (-d ibv:DEV -i ib-port).
	RequesterArgs, ResponderArgs []string
	// HTTPTimeout bounds each control call (default 30 s).
	HTTPTimeout time.Duration
	// Setup configures the machines before the repeats as Lumina's
	// orchestrator does (BuildPlan: addresses, DSCP, DCQCN knobs, the
	// injector under sde-path, the dumpers) and restores them after;
	// without it they must be set up and the services running.
	Setup bool
}

// Plan is the setup plan of a test as Setup runs it, after the options
// are checked (SetupOptions.Check).
func (rm *Remote) Plan(t *Test, mode intent.IterMode) (*Plan, error) {
	o := rm.SetupOptions
	o.IterMode = mode
	if err := o.Check(t); err != nil {
		return nil, err
	}
	return BuildPlan(t, o), nil
}

// setup runs the test's plan and waits for the services it started.
func (rm *Remote) setup(ctx context.Context, t *Test, mode intent.IterMode) (*Applied, error) {
	pl, err := rm.Plan(t, mode)
	if err != nil {
		return nil, err
	}
	a, err := pl.Execute(ctx, rm.Exec)
	if err != nil {
		return nil, fmt.Errorf("setting up the machines: %w", err)
	}
	s := &t.Spec
	addrs := map[string]string{"switch": net.JoinHostPort(s.Switch.ControlIP, strconv.Itoa(s.Switch.ListenPort)),
		"requester-mirror": rm.dumperAddr(s.RequesterMirror), "responder-mirror": rm.dumperAddr(s.ResponderMirror)}
	// The daemons were started in the background: give them the time a
	// switchd takes to load a program before calling the first one dead.
	deadline := time.Now().Add(60 * time.Second)
	for name, addr := range addrs {
		for {
			err := rm.client(addr).Do(ctx, "GET", "/healthz", nil, nil)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return a, errors.Join(step(name, "waiting for the service started on "+addr, err), a.Teardown(ctx, rm.Exec))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return a, nil
}

func (rm *Remote) binary() string {
	if rm.Binary == "" {
		return "appliance"
	}
	return rm.Binary
}

func (rm *Remote) dumperAddr(m MirrorSpec) string {
	p := rm.DumperPort
	if p == 0 {
		p = 9200
	}
	return net.JoinHostPort(m.ControlIP, strconv.Itoa(p))
}

func (rm *Remote) client(addr string) *service.Client {
	c := service.NewClient(addr)
	if rm.HTTPTimeout > 0 {
		c.HTTP.Timeout = rm.HTTPTimeout
	}
	return c
}

func hostDeviceArgs(h HostSpec, extra []string) []string {
	if len(extra) > 0 {
		return extra
	}
	port := h.NIC.IBPort
	if port == 0 {
		port = 1
	}
	return []string{"-d", "ibv:" + h.NIC.IBDevice, "-i", strconv.Itoa(port)}
}

// trafficArgs are the traffic generator's flags for a test.
func trafficArgs(t *Test) []string {
	tr := &t.Spec.Traffic
	return []string{"--rdma-verb", tr.RDMAVerb, "--num-qps", tr.NumQPs, "--num-msgs-per-qp", strconv.Itoa(tr.NumMsgsPerQP),
		"--message-size", strconv.Itoa(tr.MessageSize), "--mtu", strconv.Itoa(tr.MTU), "--tx-depth", strconv.Itoa(tr.TxDepth),
		"--min-retransmit-timeout", strconv.Itoa(tr.MinRetransmitTimeout), "--max-retransmit-retry", strconv.Itoa(tr.MaxRetransmitRetry),
		"--listen-port", strconv.Itoa(tr.ListenPort), "--barrier-sync=" + strconv.FormatBool(tr.BarrierSync),
		"--multi-gid=" + strconv.FormatBool(tr.MultiGID)}
}

// step names a component and what it was doing, so failures say which
// machine to look at.
func step(component, what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", component, what, err)
}

// runRemote runs one repeat on the test's machines. Whatever was
// collected before a failure stays in dir.
func (r *Runner) runRemote(ctx context.Context, rep int, dir string) (RepeatResult, error) {
	t, rm := r.Test, r.Remote
	s := &t.Spec
	res := RepeatResult{Repeat: rep, Dir: dir, Traffic: "not run", Integrity: "not checked", Events: "not checked"}
	if err := os.MkdirAll(filepath.Join(dir, "dumps"), 0o755); err != nil {
		return res, err
	}
	inj := rm.client(net.JoinHostPort(s.Switch.ControlIP, strconv.Itoa(s.Switch.ListenPort)))
	mirrors := []struct {
		name string
		spec MirrorSpec
	}{{"requester-mirror", s.RequesterMirror}, {"responder-mirror", s.ResponderMirror}}
	// Reachability first, with what to fix.
	if err := inj.Do(ctx, "GET", "/v1/stats", nil, nil); err != nil {
		return res, step("switch", "the injector's control API (is `appliance inject run` listening on control-ip:listen-port?)", err)
	}
	for _, m := range mirrors {
		if err := rm.client(rm.dumperAddr(m.spec)).Do(ctx, "POST", "/v1/start", nil, nil); err != nil {
			return res, step(m.name, "starting the capture (is `appliance dump` listening on "+rm.dumperAddr(m.spec)+"?)", err)
		}
	}
	stopDumpers := func() ([]*dumper.Result, error) {
		var out []*dumper.Result
		var errs []error
		for _, m := range mirrors {
			var dr dumper.Result
			c := rm.client(rm.dumperAddr(m.spec))
			if err := c.Do(context.WithoutCancel(ctx), "POST", "/v1/stop", nil, &dr); err != nil {
				errs = append(errs, step(m.name, "stopping the capture", err))
				continue
			}
			out = append(out, &dr)
		}
		return out, errors.Join(errs...)
	}
	// The intents go with the requester, which loads them with the
	// metadata into the injector before traffic.
	intents, _ := json.Marshal(inject.LoadRequest{Intents: t.Intents})
	// The responder's exchange listens where the requester dials it.
	respArgs := append([]string{rm.binary(), "lumina", "trafficgen", "--role", "responder", "--bind", s.Responder.ControlIP},
		append(hostDeviceArgs(s.Responder, rm.ResponderArgs), trafficArgs(t)...)...)
	reqArgs := append([]string{rm.binary(), "lumina", "trafficgen", "--role", "requester", "--json",
		"--seed", strconv.Itoa(rep + 1), "--injector", net.JoinHostPort(s.Switch.ControlIP, strconv.Itoa(s.Switch.ListenPort)),
		"--intents-json", string(intents)},
		append(append(hostDeviceArgs(s.Requester, rm.RequesterArgs), trafficArgs(t)...), s.Responder.ControlIP)...)
	reqBefore := rm.counters(ctx, s.Requester)
	respBefore := rm.counters(ctx, s.Responder)
	respDone := make(chan error, 1)
	go func() {
		_, err := rm.Exec.Run(ctx, s.Responder.Access, respArgs)
		respDone <- err
	}()
	out, reqErr := rm.Exec.Run(ctx, s.Requester.Access, reqArgs)
	var tg trafficgen.Result
	if len(out) > 0 {
		if err := json.Unmarshal(jsonPart(out), &tg); err != nil && reqErr == nil {
			reqErr = fmt.Errorf("reading its result: %w", err)
		}
		_ = os.WriteFile(filepath.Join(dir, "trafficgen-requester.out"), out, 0o644)
	}
	respErr := <-respDone
	dres, derr := stopDumpers()
	if reqErr != nil && len(tg.QPs) == 0 {
		return res, errors.Join(step("requester", "traffic generator", reqErr), step("responder", "traffic generator", respErr), derr)
	}
	if derr != nil {
		return res, derr
	}
	run := &EventRun{Traffic: &tg, Capture: &Capture{Results: dres}}
	if reqErr != nil {
		run.TrafficErr = reqErr
	}
	if err := inj.Do(ctx, "GET", "/v1/stats", nil, &run.Capture.Injector); err != nil {
		return res, step("switch", "reading the injector's counters", err)
	}
	var hits []inject.EntryHits
	if err := inj.Do(ctx, "GET", "/v1/entries", nil, &hits); err != nil {
		return res, step("switch", "reading the entries' hits", err)
	}
	var err error
	if run.Entries, err = intent.Compile(t.Intents, tg.Conns(), t.Geometry, intent.Options{SendConns: t.SendQPs}); err != nil {
		return res, err
	}
	for _, h := range hits {
		run.Hits = append(run.Hits, h.Hits)
	}
	// Fetch every dumper file and merge them here.
	for i, m := range mirrors {
		if i >= len(dres) {
			break
		}
		src := trace.Source{Name: m.name}
		for _, f := range dres[i].Files {
			// Dumpers may name their files alike; keep them apart.
			local, err := dumpPath(dir, m.name, f.Name)
			if err != nil {
				return res, step(m.name, "listing its files", err)
			}
			if err := fetch(ctx, rm, rm.dumperAddr(m.spec), f.Name, local); err != nil {
				return res, step(m.name, "fetching "+f.Name, err)
			}
			src.Paths = append(src.Paths, local)
		}
		run.Capture.Sources = append(run.Capture.Sources, src)
	}
	merged := filepath.Join(dir, s.AggregatePcapFilename)
	w, err := pcap.Create(merged, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true})
	if err != nil {
		return res, err
	}
	run.Trace, run.IntegrityErr = trace.Merge(ctx, run.Capture.Sources, w, trace.Options{Mirrored: int64(run.Capture.Injector.Mirrored),
		RxRoCE: int64(run.Capture.Injector.RxRoCE), FirstSeq: 1, RewritePort: uint16(s.RewriteUDPDstPort)})
	if cerr := w.Close(); cerr != nil && run.IntegrityErr == nil {
		run.IntegrityErr = cerr
	}
	if run.IntegrityErr != nil && !errors.Is(run.IntegrityErr, trace.ErrInvalidTest) {
		return res, run.IntegrityErr
	}
	// Counters the hosts would not give stay unknown (nil): the analyzers
	// then skip the counter checks.
	var reqCnt, respCnt map[string]uint64
	var reqAfter, respAfter *HostCounters
	if reqBefore != nil {
		if reqAfter = rm.counters(ctx, s.Requester); reqAfter != nil {
			reqCnt = diff(reqAfter.Flat(), reqBefore.Flat())
		}
	}
	if respBefore != nil {
		if respAfter = rm.counters(ctx, s.Responder); respAfter != nil {
			respCnt = diff(respAfter.Flat(), respBefore.Flat())
		}
	}
	// The events as the trace shows them, the injector's hit counters
	// aside (a Tofino does not even count per entry). Corrupted WRITE
	// data fails at the responder, READ responses at the requester;
	// unknown counters leave the ICRC check out.
	icrc := int64(-1)
	if reqCnt != nil && respCnt != nil {
		icrc = int64(reqCnt["rx_icrc_encapsulated"] + respCnt["rx_icrc_encapsulated"])
	}
	v := Verify{Mode: r.IterMode, Conns: tg.Conns(), Geometry: t.Geometry, Options: intent.Options{SendConns: t.SendQPs}}
	if run.Events, err = checkEvents(merged, run.Entries, t.Intents, v, icrc); err != nil {
		return res, step("analysis", "checking the events against the trace", err)
	}
	r.record(&res, run)
	// A start snapshot without its finish is of no use to Lumina's
	// analyzer: both or neither.
	if reqAfter == nil {
		reqBefore = nil
	}
	if respAfter == nil {
		respBefore = nil
	}
	if err := errors.Join(r.writeRun(dir, run), r.writeMeta(dir, rep, run, reqCnt, respCnt),
		r.writeLumina(&res, merged, run, reqBefore, reqAfter, respBefore, respAfter)); err != nil {
		return res, err
	}
	return res, r.analyze(ctx, dir, &res)
}

// jsonPart is the JSON document in a command's output: from its first
// brace on (the requester's log lines go to its standard error, but a
// login shell may print a banner first).
func jsonPart(out []byte) []byte {
	if i := bytes.IndexByte(out, '{'); i >= 0 {
		return out[i:]
	}
	return out
}

func fetch(ctx context.Context, rm *Remote, addr, name, local string) error {
	c := rm.client(addr)
	req, err := c.NewRequest(ctx, "GET", "/v1/files/"+url.PathEscape(name), nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	f, err := os.Create(local)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if _, err := io.Copy(bw, resp.Body); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// hostCounterScript prints an RNIC's counters as Lumina's counter dump
// reads them: each sysfs counter (hw_counters and the port counters) as
// "<dir> <name> <value>", then each line of ethtool -S prefixed with
// "ethtool". It is a constant; the device, port and interface reach it as
// its arguments ($1, $2, $3), each quoted on the way through ssh. A NIC
// with no ethtool statistics (or no if-name) just gives none.
const hostCounterScript = `cd "/sys/class/infiniband/$1/ports/$2" || exit 1
for f in hw_counters/* counters/*; do [ -f "$f" ] && echo "${f%%/*}" "${f#*/}" $(cat "$f"); done
[ -n "$3" ] && ethtool -S "$3" 2>/dev/null | while IFS= read -r l; do echo "ethtool $l"; done
exit 0`

// counters reads an RNIC's counters on its host, by section; nil when
// they cannot be read.
func (rm *Remote) counters(ctx context.Context, h HostSpec) *HostCounters {
	if h.NIC.IBDevice == "" {
		return nil
	}
	port := h.NIC.IBPort
	if port == 0 {
		port = 1
	}
	if !ValidIBDevice(h.NIC.IBDevice) {
		return nil
	}
	out, err := rm.Exec.Run(ctx, h.Access, []string{"sh", "-c", hostCounterScript, "sh", h.NIC.IBDevice, strconv.Itoa(port), h.NIC.IfName})
	if err != nil {
		return nil
	}
	hc, _ := ParseHostCounters(NICVendor(h.NIC.Type), out)
	if len(hc.Port)+len(hc.HW) == 0 {
		return nil
	}
	sortCounts(hc.Port)
	sortCounts(hc.HW)
	return &hc
}
