#!/usr/bin/env bash
# The GPU checks behind results/checks-1, run from the checkout's root with
# the bundle (`cargo xtask bundle`) in dist/mage: OUT names the folder the
# logs go to. Builds nothing.
set -u
O=${OUT:?}
B=$PWD/dist/mage
export PYTHONUNBUFFERED=1 PYTHONPATH=$B/python:$PWD/python
cd "$B"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$O/gpu-check.txt" 2>&1
./mage doctor >> "$O/gpu-check.txt" 2>&1
# gpu-check: the contract, every stage GPU against the emulator and, now, against the reference.
./mage gpu-check >> "$O/gpu-check.txt" 2>&1; echo "exit $?" >> "$O/gpu-check.txt"
# Every op at its default dims, and matmul at transformer hidden sizes and the odd shapes, every stage.
{
  for op in layernorm gelu triangle matmul; do ./mage run $op --no-timing; echo "exit $?"; done
  for g in uniform power-law; do ./mage run neighbor --gen $g --no-timing; echo "exit $?"; done
  for d in 4096,768,768 4096,3072,768 4096,768,3072 2048,1024,4096 1024,1024,1 1000,1037,999; do
    for s in current mage-001 mage-007 mage-008 mage-009 mage-010; do ./mage run matmul --dims $d --stage $s --no-timing; echo "exit $?"; done
  done
} > "$O/run.txt" 2>&1
# Cases at other scales: every stage of the contractions must pass at 1e-6, 1e6 and 1e15 and on rows scaled by 10^U(-3,3).
{
  for spec in matmul:256,256,256 matmul:129,67,300 triangle:64,8 triangle:33,12 neighbor:1024,16,8192; do
    op=${spec%%:*}; d=${spec#*:}
    for sc in 1e-6 1e6 1e15 rows; do
      c=/tmp/case-$op-$d-$sc; rm -rf "$c"
      ./mage fixtures $op --dims $d --out "$c" > /dev/null || { echo "fixtures $op $d failed"; continue; }
      if [ $sc = rows ]; then python3 "$B/../../python/gpu_checks/scale_case.py" "$c" 1 --rows; else python3 "$B/../../python/gpu_checks/scale_case.py" "$c" $sc; fi
      for s in current mage-001 mage-002 mage-003 mage-004 mage-005 mage-006 mage-007 mage-008 mage-009 mage-010; do
        r=$(./mage run $op --case "$c" --stage $s --no-timing 2>&1); rc=$?
        case "$r" in *"has no stage"*|*"does not support"*) continue;; esac
        echo "$op $d scale $sc $s exit $rc: $(echo "$r" | grep -E '^check:|error' | head -1 | cut -c1-220)"
      done
    done
  done
} > "$O/scale.txt" 2>&1
# The module: bad graphs refused, every neighbor stage correct through it, the validation's cost; memcheck on that path.
python3 "$PWD/../../python/gpu_checks/module_graph.py" --out "$O" > "$O/module-graph.txt" 2>&1; echo "exit $?" >> "$O/module-graph.txt"
compute-sanitizer --tool memcheck --error-exitcode 9 python3 "$PWD/../../python/gpu_checks/module_graph.py" --quick --out /tmp/q > "$O/memcheck.txt" 2>&1; echo "exit $?" >> "$O/memcheck.txt"
# The README's PyTorch example, as written there.
sed -n '/mage:example pytorch/,/^```$/p' "$B/../../README.md" | sed '1,2d;$d' > /tmp/example.py
{ python3 /tmp/example.py; echo "exit $?"; } >> "$O/module-graph.txt" 2>&1
# A quick comparison: the harness holds torch, torch.compile, Triton and Mage to the same magnitude-scaled bound.
timeout 240 ./mage compare matmul neighbor layernorm --quick --namespace checks-quick > "$O/compare-quick.txt" 2>&1; echo "exit $?" >> "$O/compare-quick.txt"
f=$(find / -path /proc -prune -o -name comparison.json -path '*checks-quick*' -print 2>/dev/null | head -1); [ -n "$f" ] && cp "$f" "$O/comparison-quick.json"
cd "$B/../.."
tail -n 3 "$O"/gpu-check.txt "$O"/module-graph.txt "$O"/memcheck.txt
echo "run: $(grep -c 'exit 0' "$O/run.txt") exit 0, $(grep -c 'exit [1-9]' "$O/run.txt") other"
echo "scale: $(grep -c 'exit 0' "$O/scale.txt") exit 0, $(grep -c 'exit [1-9]' "$O/scale.txt") other"; grep "exit [1-9]" "$O/scale.txt" | head -20
