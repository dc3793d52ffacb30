package switchemu

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// db is CONFIG_DB: table -> key -> field -> value.
type db map[string]map[string]map[string]string

func (d db) clone() db {
	c := db{}
	for t, keys := range d {
		c[t] = map[string]map[string]string{}
		for k, fields := range keys {
			c[t][k] = map[string]string{}
			for f, v := range fields {
				c[t][k][f] = v
			}
		}
	}
	return c
}

func (d db) json() string {
	b, _ := json.MarshalIndent(d, "", "    ")
	return string(b)
}

// sonicState is SONiC: CONFIG_DB, the saved config_db.json and the
// Generic Config Updater's checkpoints.
type sonicState struct {
	o           *Options
	run, saved  db
	checkpoints map[string]db
}

func newSonic(o *Options) *sonicState {
	if o.Hostname == "" {
		o.Hostname = "sonic"
	}
	if len(o.Ports) == 0 {
		o.Ports = []string{"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"}
	}
	d := db{"DEVICE_METADATA": {"localhost": {"hostname": o.Hostname, "hwsku": "Force10-S6000"}},
		"PORT": {}, "WRED_PROFILE": {}, "BUFFER_PROFILE": {"ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0", "dynamic_th": "3"}},
		"QUEUE": {}, "BUFFER_PG": {}, "BUFFER_POOL": {"ingress_lossless_pool": {"mode": "dynamic", "type": "ingress"}}}
	for i, p := range o.Ports {
		d["PORT"][p] = map[string]string{"admin_status": "up", "mtu": "9100", "speed": "100000", "lanes": fmt.Sprint(4*i + 1)}
	}
	return &sonicState{o: o, run: d, saved: d.clone(), checkpoints: map[string]db{}}
}

func (st *sonicState) running() string { return st.run.json() }
func (st *sonicState) startup() string { return st.saved.json() }

func (st *sonicState) leftovers() []string {
	var out []string
	for n := range st.checkpoints {
		out = append(out, "checkpoint "+n)
	}
	return out
}

// sonicShell is an admin's bash on SONiC.
type sonicShell struct {
	sw *Switch
	st *sonicState
	rc int
}

func (st *sonicState) newShell(sw *Switch) shell { return &sonicShell{sw: sw, st: st} }

func (sh *sonicShell) banner() string {
	return "Linux " + sh.st.o.Hostname + " 5.10.0-18-2-amd64 #1 SMP Debian 5.10.140-1 x86_64\nYou are on\n  ____   ___  _   _ _  ____\n / ___| / _ \\| \\ | (_)/ ___|\n \\___ \\| | | |  \\| | | |\n  ___) | |_| | |\\  | | |___\n |____/ \\___/|_| \\_|_|\\____|\n\n-- Software for Open Networking in the Cloud --\n"
}

func (sh *sonicShell) prompt() string { return "admin@" + sh.st.o.Hostname + ":~$ " }

var (
	sonicPatchRE = regexp.MustCompile(`^echo '([^']*)' \| sudo config apply-patch /dev/stdin$`)
	sonicCmdRE   = regexp.MustCompile(`^sudo config (checkpoint|rollback|delete-checkpoint) (\S+)$`)
)

func (sh *sonicShell) exec(line string) reply {
	out, rc := sh.run(line)
	if line != "echo $?" {
		sh.rc = rc
	}
	return reply{out: out}
}

func (sh *sonicShell) run(line string) (string, int) {
	st := sh.st
	switch {
	case line == "":
		return "", sh.rc
	case line == "echo $?":
		return fmt.Sprint(sh.rc), 0
	case line == "exit":
		return "logout", 0
	case line == "show runningconfiguration all":
		return st.run.json(), 0
	case line == "sudo config save -y":
		st.saved = st.run.clone()
		return "Running command: /usr/local/bin/sonic-cfggen -d --print-data > /etc/sonic/config_db.json", 0
	case strings.HasPrefix(line, "config ") || strings.Contains(line, "| config "):
		return "Root privileges are required for this operation", 1
	}
	if m := sonicPatchRE.FindStringSubmatch(line); m != nil {
		return sh.patch(m[1])
	}
	if m := sonicCmdRE.FindStringSubmatch(line); m != nil {
		name := m[2]
		_, exists := st.checkpoints[name]
		switch {
		case m[1] == "checkpoint":
			st.checkpoints[name] = st.run.clone()
			return "Config Rollbacker: Config checkpoint starting.\nConfig Rollbacker: Checkpoint name: " + name + ".\nConfig Rollbacker: Getting current config db.\nConfig Rollbacker: Checkpoint created successfully.", 0
		case !exists:
			return "Error: Checkpoint '" + name + "' does not exist.", 1
		case m[1] == "rollback":
			st.run = st.checkpoints[name].clone()
			return "Config Rollbacker: Config rollbacking starting.\nConfig Rollbacker: Checkpoint name: " + name + ".\nConfig Rollbacker: Config rolled back successfully.", 0
		default:
			delete(st.checkpoints, name)
			return "Config Rollbacker: Deleting checkpoint: " + name + ".\nConfig Rollbacker: Checkpoint deleted successfully.", 0
		}
	}
	word := strings.Fields(line)[0]
	if word == "sudo" && len(strings.Fields(line)) > 1 {
		return "Usage: config [OPTIONS] COMMAND [ARGS]...\nError: No such command \"" + strings.Join(strings.Fields(line)[1:], " ") + "\".", 2
	}
	return "-bash: " + word + ": command not found", 127
}

// sonicRefs are the references the YANG models check: a row's field must
// name a row of another table.
var sonicRefs = map[string][2]string{"QUEUE": {"wred_profile", "WRED_PROFILE"}, "BUFFER_PG": {"profile", "BUFFER_PROFILE"}}

// patch applies an RFC 6902 patch of "add" and "remove" operations on
// rows, one operation at a time as the updater does, so an operation that
// fails leaves the ones before it applied.
func (sh *sonicShell) patch(text string) (string, int) {
	var ops []struct {
		Op    string            `json:"op"`
		Path  string            `json:"path"`
		Value map[string]string `json:"value"`
	}
	if err := json.Unmarshal([]byte(text), &ops); err != nil {
		return "Error: Expecting a JSON patch: " + err.Error(), 1
	}
	st := sh.st
	msg := "Patch Applier: localhost: Patch application starting.\nPatch Applier: localhost: Patch: " + text + "\n"
	for _, op := range ops {
		b, _ := json.Marshal(op)
		parts := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
		if len(parts) != 2 {
			return msg + "Error: path " + op.Path + " is not /TABLE/KEY", 1
		}
		table, key := parts[0], parts[1]
		rows, ok := st.run[table]
		if !ok {
			return msg + "Error: can't add to non-existing table " + table, 1
		}
		if sh.sw.failOn(string(b)) {
			return msg + "Error: Given patch will produce invalid config. Error: value rejected by the platform: " + string(b), 1
		}
		if sh.sw.ignore(string(b)) {
			continue
		}
		switch op.Op {
		case "add", "replace":
			if ref, ok := sonicRefs[table]; ok {
				port, _, _ := strings.Cut(key, "|")
				if _, ok := st.run["PORT"][port]; !ok {
					return msg + "Error: Given patch will produce invalid config. Error: " + table + " key " + key + " names no PORT", 1
				}
				if _, ok := st.run[ref[1]][op.Value[ref[0]]]; !ok {
					return msg + "Error: Given patch will produce invalid config. Error: " + ref[0] + " " + op.Value[ref[0]] + " is not in " + ref[1], 1
				}
			}
			rows[key] = op.Value
		case "remove":
			delete(rows, key)
		default:
			return msg + "Error: op " + op.Op + " is not supported here", 1
		}
	}
	keys := make([]string, 0, len(ops))
	for _, op := range ops {
		keys = append(keys, op.Path)
	}
	sort.Strings(keys)
	return msg + "Patch Applier: localhost: applying " + fmt.Sprint(len(keys)) + " change(s).\nPatch applied successfully.", 0
}
