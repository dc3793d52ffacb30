package bfrt

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

// DevPorts bounds Tofino dev ports: 4 pipes of 128, of which 0..71 are
// ports in each pipe.
const DevPorts = 512

// Port is the part of a switch port every program configures alike.
// dta.Port converts to it; lumina.Port, which adds addresses, copies its
// fields.
type Port struct {
	Name       string
	FrontPanel string
	DevPort    int
	Speed      string
	FEC        string
	AutoNeg    string
	MAC        header.MAC
}

var (
	nameRE       = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31}$`)
	progRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	frontPanelRE = regexp.MustCompile(`^([0-9]+)/([0-9]+)$`)
)

var speeds = map[string]string{
	"1G": "BF_SPEED_1G", "10G": "BF_SPEED_10G", "25G": "BF_SPEED_25G",
	"40G": "BF_SPEED_40G", "50G": "BF_SPEED_50G", "100G": "BF_SPEED_100G",
}

var fecs = map[string]string{
	"none": "BF_FEC_TYP_NONE", "fc": "BF_FEC_TYP_FIRECODE", "rs": "BF_FEC_TYP_REED_SOLOMON",
}

var autonegs = map[string]string{
	"": "PM_AN_DEFAULT", "default": "PM_AN_DEFAULT", "on": "PM_AN_FORCE_ENABLE", "off": "PM_AN_FORCE_DISABLE",
}

// IsName reports whether s may name a port (or another object a script
// puts in a variable or a comment): letters, digits, '_' and '-',
// starting with a letter, at most 32.
func IsName(s string) bool { return nameRE.MatchString(s) }

// IsIdentifier reports whether s is a P4 identifier, as a program's bfrt
// name must be.
func IsIdentifier(s string) bool { return progRE.MatchString(s) }

// ProgName is name, or def when name is empty.
func ProgName(name, def string) string {
	if name == "" {
		return def
	}
	return name
}

// PortVar is the script's variable holding a port's dev port. '-' is not
// allowed in Python names, hence CheckPorts refuses names that differ
// only in '-' and '_'.
func PortVar(name string) string { return "port_" + strings.ReplaceAll(name, "-", "_") }

// Bad is a validation error: it wraps the program's sentinel (each
// control plane has its own, such as lumina.ErrProgram) and names the
// field at fault, as in "ports[1].speed". It is a *FieldError, so that
// a spec file's loader can put the field's line beside the message.
func Bad(sentinel error, field, format string, a ...any) error {
	return &FieldError{Sentinel: sentinel, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// FieldError is Bad's error: the sentinel it wraps, the field at fault
// and what is wrong with it.
type FieldError struct {
	Sentinel   error
	Field, Msg string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%v: %s: %s", e.Sentinel, e.Field, e.Msg) }

func (e *FieldError) Unwrap() error { return e.Sentinel }

// CheckPorts validates ports in order, each wholly before the next, so
// the error names the first bad field; more, when not nil, checks what
// the program adds to port i (f is "ports[i]") after its common fields.
// Errors wrap sentinel.
func CheckPorts(sentinel error, ports []Port, more func(i int, f string) error) error {
	bad := func(field, format string, a ...any) error { return Bad(sentinel, field, format, a...) }
	if len(ports) == 0 {
		return bad("ports", "no ports")
	}
	names := map[string]bool{}
	vars := map[string]string{}
	for i, pt := range ports {
		f := fmt.Sprintf("ports[%d]", i)
		if !IsName(pt.Name) {
			return bad(f+".name", "%q: letters, digits, '_' and '-', starting with a letter, at most 32", pt.Name)
		}
		if names[pt.Name] {
			return bad(f+".name", "%q named twice", pt.Name)
		}
		v := PortVar(pt.Name)
		if other, dup := vars[v]; dup {
			return bad(f+".name", "%q and %q differ only in '-' and '_'", pt.Name, other)
		}
		vars[v] = pt.Name
		names[pt.Name] = true
		if pt.FrontPanel != "" {
			m := frontPanelRE.FindStringSubmatch(pt.FrontPanel)
			if m == nil {
				return bad(f+".front_panel", "%q: want conn/chnl such as 1/0", pt.FrontPanel)
			}
			conn, _ := strconv.Atoi(m[1])
			chnl, _ := strconv.Atoi(m[2])
			if conn < 1 || conn > 65 || chnl > 7 {
				return bad(f+".front_panel", "%q: conn 1-65, chnl 0-7", pt.FrontPanel)
			}
		} else if pt.DevPort < 0 || pt.DevPort >= DevPorts || pt.DevPort&127 >= 72 {
			return bad(f+".dev_port", "%d is not a Tofino dev port (pipe*128 + 0..71)", pt.DevPort)
		}
		if _, ok := speeds[strings.ToUpper(pt.Speed)]; !ok {
			return bad(f+".speed", "%q: want 1G, 10G, 25G, 40G, 50G or 100G", pt.Speed)
		}
		if _, ok := fecs[strings.ToLower(pt.FEC)]; !ok {
			return bad(f+".fec", "%q: want none, fc or rs", pt.FEC)
		}
		if _, ok := autonegs[strings.ToLower(pt.AutoNeg)]; !ok {
			return bad(f+".autoneg", "%q: want default, on or off", pt.AutoNeg)
		}
		if more != nil {
			if err := more(i, f); err != nil {
				return err
			}
		}
	}
	return nil
}
