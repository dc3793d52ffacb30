package p4test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mockBfrt stands in for bfrt_python: every attribute is a node, every
// call prints "CALL <path> k=v ..." and returns the node (so
// entry_with_normal(...).push() works); port_hdl_info, counter and register
// reads return data shaped like bfrt's, the values from the program's
// answers (ANSWERS is replaced by them). The script runs as a file or,
// like an interactive bfshell session, line by line.
const mockBfrt = `
import code
import sys

ANSWERS


class Entry:
    def __init__(self, data):
        self.data = data


class Node:
    def __init__(self, path):
        self._path = path

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return Node(self._path + '.' + name)

    def __call__(self, *args, **kw):
        p = self._path
        if args:
            raise TypeError(p + ': positional arguments')
        print('CALL ' + p + ' ' + ' '.join('%s=%r' % (k, kw[k]) for k in sorted(kw)))
        if p == 'bfrt.port.port_hdl_info.get':
            return Entry({b'$DEV_PORT': 128 + 4 * (kw['CONN_ID'] - 1) + kw['CHNL_ID']})
        if p.endswith('.get') and 'COUNTER_INDEX' in kw:
            return Entry(counter_data(p.split('.')[-2], kw['COUNTER_INDEX']))
        if p.endswith('.get') and 'REGISTER_INDEX' in kw:
            parts = p.split('.')
            field = (parts[-3] + '.' + parts[-2] + '.f1').encode()
            return Entry({field: register_values(parts[-2], kw['REGISTER_INDEX'])})
        return self


class Console(code.InteractiveConsole):
    def showtraceback(self):
        super().showtraceback()
        sys.exit(1)

    def showsyntaxerror(self, filename=None, **kw):
        super().showsyntaxerror(filename)
        sys.exit(1)


bfrt = Node('bfrt')
src = open(sys.argv[2]).read()
if sys.argv[1] == 'file':
    exec(compile(src, sys.argv[2], 'exec'), {'bfrt': bfrt})
else:
    con = Console({'bfrt': bfrt})
    for line in src.split('\n'):
        con.push(line)
    if con.push(''):
        sys.exit('the script ends inside a statement')
`

// RunBfrt runs script against a mock bfrt_python, whole (mode "file") or
// line by line as bfshell feeds it (mode "interactive"), and returns what
// it printed: a "CALL <path> k=v ..." line per bfrt call, keywords
// sorted, and whatever the script prints. A positional argument, a
// Python error or a script ending inside a statement fails the test.
//
// answers is Python defining what the program's reads return:
// counter_data(table, index), the data dict of a counter entry
// ({b'$COUNTER_SPEC_PKTS': n, ...}), and register_values(register,
// index), a register's value per pipe.
//
// Without a working python3 the test is skipped.
func RunBfrt(t *testing.T, answers, mode, script string) string {
	t.Helper()
	py := python(t)
	dir := t.TempDir()
	mock, prog := writeMock(t, dir, answers), filepath.Join(dir, "script.py")
	if err := os.WriteFile(prog, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, mock, mode, prog).CombinedOutput()
	if err != nil {
		t.Fatalf("python3 (%s mode): %v\n%s", mode, err, out)
	}
	return string(out)
}

// python is python3's path; the test is skipped without a working one.
func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the generated scripts are not run")
	}
	if err := exec.Command(py, "-c", "pass").Run(); err != nil {
		t.Skipf("python3 does not run (%v): the generated scripts are not run", err)
	}
	return py
}

// writeMock writes the mock bfrt_python with answers into dir.
func writeMock(t *testing.T, dir, answers string) string {
	t.Helper()
	mock := filepath.Join(dir, "mock.py")
	if err := os.WriteFile(mock, []byte(strings.Replace(mockBfrt, "ANSWERS", strings.TrimSpace(answers), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return mock
}

// MockSDE is an SDE directory whose run_bfshell.sh runs the script it is
// given (`run_bfshell.sh -b FILE`, SDE set to the directory, as a control
// plane runs the SDE's) against the mock bfrt_python of RunBfrt, as a
// file, and keeps a copy of it as scripts/N.py (N from 1); anything else
// fails as bfshell would. Without a working python3 the test is skipped.
func MockSDE(t *testing.T, answers string) string {
	t.Helper()
	py := python(t)
	dir := t.TempDir()
	writeMock(t, dir, answers)
	if err := os.Mkdir(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := `#!/bin/sh
dir=$(cd "$(dirname "$0")" && pwd)
[ "$1" = -b ] && [ -f "$2" ] || { echo "usage: run_bfshell.sh -b FILE" >&2; exit 2; }
[ "$SDE" = "$dir" ] && [ "$SDE_INSTALL" = "$dir/install" ] || { echo "SDE=$SDE SDE_INSTALL=$SDE_INSTALL: not this SDE" >&2; exit 3; }
n=$(ls "$dir/scripts" | wc -l)
cp "$2" "$dir/scripts/$((n + 1)).py"
exec "` + py + `" "$dir/mock.py" file "$2"
`
	if err := os.WriteFile(filepath.Join(dir, "run_bfshell.sh"), []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
