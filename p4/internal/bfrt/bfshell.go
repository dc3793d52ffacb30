package bfrt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Bfshell returns a function that runs a bfrt_python script on the
// switch the way the SDE's tools expect: `$SDE/run_bfshell.sh -b FILE`
// with SDE and SDE_INSTALL set, the script in a temporary file named
// after prefix. It returns what bfshell printed (stdout and stderr); on
// failure the error names the command and bfshell's last line.
func Bfshell(sde, prefix string) func(ctx context.Context, script string) ([]byte, error) {
	return func(ctx context.Context, script string) ([]byte, error) {
		f, err := os.CreateTemp("", prefix+"-*.py")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		if _, err := f.WriteString(script); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, filepath.Join(sde, "run_bfshell.sh"), "-b", f.Name())
		cmd.Env = append(os.Environ(), "SDE="+sde, "SDE_INSTALL="+filepath.Join(sde, "install"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return out.Bytes(), fmt.Errorf("%s: %w: %s", cmd.Path, err, lastLine(out.Bytes()))
		}
		return out.Bytes(), nil
	}
}

func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return string(b[i+1:])
	}
	return string(b)
}
