package tuning

import (
	"context"
	"errors"
	"testing"

	"github.com/rdma-appliance/appliance/tuning/switchemu"
)

// The session follows each CLI's modes by its prompts, and a command given
// in the wrong mode is refused with the vendor's error (the emulators hold
// the vendors to their modes; the session reports the refusal).
func TestCLIModesAndPrompts(t *testing.T) {
	type line struct {
		cmd, prompt string
		refused     bool
	}
	for v, lines := range map[string][]line{
		"eos": {
			{"interface Ethernet1", "leaf1#", true}, // a configuration command in exec mode
			{"configure", "leaf1(config)#", false},
			{"interface Ethernet1", "leaf1(config-if-Et1)#", false},
			{"random-detect ecn minimum-threshold 1 bytes maximum-threshold 2 bytes", "leaf1(config-if-Et1)#", true},
			{"tx-queue 3", "leaf1(config-if-Et1-txq-3)#", false},
			{"random-detect ecn minimum-threshold 1 bytes maximum-threshold 2 bytes", "leaf1(config-if-Et1-txq-3)#", false},
			{"interface Ethernet2", "leaf1(config-if-Et2)#", false}, // a parent mode's command
			{"end", "leaf1#", false},
			{"configure session s1", "leaf1(config-s-s1)#", false},
			{"interface Ethernet1", "leaf1(config-s-s1-if-Et1)#", false},
			{"end", "leaf1#", false},
			{"configure session s1 abort", "leaf1#", false},
		},
		"nxos": {
			{"policy-map type queuing q", "n9k-leaf1#", true},
			{"configure terminal", "n9k-leaf1(config)#", false},
			{"policy-map type queuing q", "n9k-leaf1(config-pmap-que)#", false},
			{"random-detect minimum-threshold 1 bytes maximum-threshold 2 bytes drop-probability 7 weight 0 ecn", "n9k-leaf1(config-pmap-que)#", true},
			{"class type queuing c-out-8q-q3", "n9k-leaf1(config-pmap-c-que)#", false},
			{"pause buffer-size 3 pause-threshold 2 resume-threshold 1", "n9k-leaf1(config-pmap-c-que)#", true}, // ingress only
			{"random-detect minimum-threshold 1 bytes maximum-threshold 2 bytes drop-probability 7 weight 0 ecn", "n9k-leaf1(config-pmap-c-que)#", false},
			{"interface Ethernet1/1", "n9k-leaf1(config-if)#", false},
			{"end", "n9k-leaf1#", false},
		},
		"vrp": {
			{"drop-profile p", "<HUAWEI>", true},
			{"system-view", "[~HUAWEI]", false},
			{"interface 100GE1/0/1", "[~HUAWEI-100GE1/0/1]", false},
			{"color green low-limit 10 high-limit 20 discard-percentage 5", "[~HUAWEI-100GE1/0/1]", true},
			{"drop-profile p", "[*HUAWEI-drop-profile-p]", false}, // creating it is a change
			{"color green low-limit 10 high-limit 20 discard-percentage 5", "[*HUAWEI-drop-profile-p]", false},
			{"clear configuration candidate", "[~HUAWEI]", false},
			{"return", "<HUAWEI>", false},
		},
		"comware": {
			{"qos wred queue table T", "<H3C>", true},
			{"system-view", "[H3C]", false},
			{"interface HundredGigE1/0/1", "[H3C-HundredGigE1/0/1]", false},
			{"queue 3 ecn", "[H3C-HundredGigE1/0/1]", true},
			{"qos wred apply T", "[H3C-HundredGigE1/0/1]", true}, // no such table yet
			{"qos wred queue table T", "[H3C-wred-table-T]", false},
			{"queue 3 ecn", "[H3C-wred-table-T]", false},
			{"return", "<H3C>", false},
		},
		"sonic": {
			{"configure terminal", "admin@sonic:~$ ", true},
			{"config checkpoint x", "admin@sonic:~$ ", true}, // needs sudo
			{"sudo config checkpoint x", "admin@sonic:~$ ", false},
			{"sudo config delete-checkpoint x", "admin@sonic:~$ ", false},
		},
	} {
		t.Run(v, func(t *testing.T) {
			s, sw := emu(t, v, "leaf1", switchemu.Options{})
			c, err := trusting(t, s).Open(context.Background(), sw)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, l := range lines {
				_, err := c.Run(context.Background(), step{cmd: l.cmd})
				var re *RefusedError
				if refused := errors.As(err, &re); refused != l.refused || (err != nil && !refused) {
					t.Errorf("%q: err %v, want refused %v", l.cmd, err, l.refused)
				}
				if c.Prompt() != l.prompt {
					t.Errorf("%q: prompt %q, want %q", l.cmd, c.Prompt(), l.prompt)
				}
			}
		})
	}
}
