"""Compares the kernel entries of two PTX files: each entry's text with
LLVM's basic-block label numbers ($L__BB<function>_<block>: the function's
number changes when a kernel is added before it) and comments removed.

    python3 ptx_entries.py OLD.ptx NEW.ptx
Prints how many entries are identical, which differ, which are new or gone.
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


old, new = entries(sys.argv[1]), entries(sys.argv[2])
same = sorted(k for k in old if new.get(k) == old[k])
differ = sorted(k for k in old if k in new and new[k] != old[k])
print(f"{len(same)} of {len(old)} entries identical; differ: {differ}; gone: {sorted(set(old) - set(new))}; new: {sorted(set(new) - set(old))}")
sys.exit(1 if differ else 0)
