# A stand-in for bfshell running a bfrt_python script against a switch whose
# registers are a JSON file (Switch.Registers): python3 bfshell.py REGS.json
# SCRIPT. The script is fed line by line, as bfshell feeds `bfshell -b`;
# only register reads (get by REGISTER_INDEX) and syncs are answered.
import code
import json
import sys

regs = json.load(open(sys.argv[1]))


class Entry:
    def __init__(self, data):
        self.data = data


class Register:
    def __init__(self, ctl, name):
        self.ctl, self.name = ctl, name

    def operation_register_sync(self):
        pass

    def get(self, REGISTER_INDEX, from_hw, print_ents):
        field = (self.ctl + '.' + self.name + '.f1').encode()
        return Entry({field: [regs[self.name][REGISTER_INDEX]]})


class Node:
    def __init__(self, path):
        self._path = path

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        parts = self._path.split('.')
        if len(parts) == 4 and parts[2] == 'pipe':
            return Register(parts[3], name)
        return Node(self._path + '.' + name)


class Console(code.InteractiveConsole):
    def showtraceback(self):
        super().showtraceback()
        sys.exit(1)

    def showsyntaxerror(self, filename=None, **kw):
        super().showsyntaxerror(filename)
        sys.exit(1)


con = Console({'bfrt': Node('bfrt')})
for line in open(sys.argv[2]).read().split('\n'):
    con.push(line)
if con.push(''):
    sys.exit('the script ends inside a statement')
