"""Compares the kernel entries of two PTX files: each entry's text with
LLVM's basic-block label numbers ($L__BB<function>_<block>: the function's
number changes when a kernel is added before it) and comments removed.
Entries that still differ are compared again with their virtual registers
(%r, %rd, %p, %f) renamed in order of first appearance: the same
instructions on the same operands, only the register numbers LLVM picked
differ ("the same up to register names").

    python3 ptx_entries.py OLD.ptx NEW.ptx
Prints how many entries are identical, which are the same up to register
names, which differ, which are new or gone; exits 1 where any differs.
"""
import re
import sys


def entries(path):
    text = open(path).read()
    out = {}
    for m in re.finditer(r"\.visible \.entry (\w+)\(", text):
        body = text[m.start():text.find("\n}\n", m.start())]
        body = re.sub(r"\$L__BB\d+_", "$L__BB_", body)
        out[m.group(1)] = "\n".join(line.split("//")[0].rstrip() for line in body.split("\n"))
    return out


def renamed(body):
    names = {}
    return re.sub(r"%(rd|r|p|f|fd)(\d+)", lambda m: names.setdefault(m.group(0), f"%{m.group(1)}#{len(names)}"), body)


old, new = entries(sys.argv[1]), entries(sys.argv[2])
same = sorted(k for k in old if new.get(k) == old[k])
up_to_names = sorted(k for k in old if k in new and new[k] != old[k] and renamed(new[k]) == renamed(old[k]))
differ = sorted(k for k in old if k in new and renamed(new[k]) != renamed(old[k]))
print(f"{len(same)} of {len(old)} entries identical; the same up to register names: {up_to_names}; differ: {differ}; "
      f"gone: {sorted(set(old) - set(new))}; new: {sorted(set(new) - set(old))}")
sys.exit(1 if differ else 0)
