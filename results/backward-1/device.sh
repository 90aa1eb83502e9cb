#!/usr/bin/env bash
# The GPU evidence behind results/backward-1, run from the checkout's root
# with the bundle (`cargo xtask bundle`) in dist/mage: OUT names the folder
# the logs go to. Builds nothing.
set -u
O=${OUT:?}
R=$PWD
B=$R/dist/mage
export PYTHONUNBUFFERED=1 PYTHONPATH=$B/python:$R/python
cd "$B"
OPS=${OPS:-layernorm_backward gelu_backward triangle_backward}
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; ./mage gpu-check; echo "exit $?"; } > "$O/gpu-check.txt" 2>&1
# Every backward stage at its default dims, with the three instruments.
{ for op in $OPS; do for s in $(python3 -c "import mage,sys; print(' '.join(s['name'] for s in mage.op_info(sys.argv[1])['stages']))" $op) current; do ./mage run $op --stage $s; echo "exit $?"; done; done; } > "$O/run.txt" 2>&1
# PyTorch's backward (eager, torch.compile) beside every stage, default and sweep shapes, checked against float64 autograd.
./mage compare $OPS --sweep --mode hot --namespace ${NS:-backward-1} > "$O/compare.txt" 2>&1; echo "exit $?" >> "$O/compare.txt"
f=$(find "$B" "$R" -name comparison.json -path "*${NS:-backward-1}*" 2>/dev/null | head -1)
[ -n "$f" ] && cp "$f" "$O/comparison.json" && cp "$(dirname "$f")/comparison.md" "$O/comparison.md" 2>/dev/null
# compute-sanitizer, all four tools, every backward stage.
{ for op in $OPS; do ./mage sanitize $op; echo "exit $?"; done; } > "$O/sanitize.txt" 2>&1
cd "$R"
tail -n 2 "$O"/gpu-check.txt "$O"/sanitize.txt "$O"/compare.txt
echo "run: $(grep -c 'exit 0' "$O/run.txt") exit 0, $(grep -c 'exit [1-9]' "$O/run.txt") other"
