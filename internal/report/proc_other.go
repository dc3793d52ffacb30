//go:build !unix

package report

import "os/exec"

// killGroup: elsewhere only the browser's own process is killed.
func killGroup(*exec.Cmd) {}
