#!/usr/bin/env bash
# The GPU evidence behind results/backward-3, run from the checkout's root
# with the bundle (`cargo xtask bundle`) in dist/mage; OUT names the folder
# the logs go to, PART which half: `compare` (gpu-check, then compare of
# every gradient op, the transposed products, gelu_erf, and matmul at 1024³
# and 4096³ beside them) or `checks` (every new stage run, compute-sanitizer,
# the PyTorch package's checks). Builds nothing.
set -u
O=${OUT:?}
R=$PWD
B=$R/dist/mage
export PYTHONUNBUFFERED=1 PYTHONPATH=$B/python:$R/python
[ -d "$R/.whl" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$R"/.whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
cd "$B"
OPS="layernorm_backward gelu_backward triangle_backward neighbor_backward matmul_nt matmul_tn gelu_erf"
NS=${NS:-backward-3}
case ${PART:?} in
compare)
  { nvidia-smi --query-gpu=index,name,driver_version --format=csv; ./mage gpu-check; echo "exit $?"; } > "$O/gpu-check.txt" 2>&1
  ./mage compare $OPS --sweep --mode hot --at matmul:1024,1024,1024 --at matmul:4096,4096,4096 --namespace $NS > "$O/compare.txt" 2>&1; echo "exit $?" >> "$O/compare.txt"
  f=$(find "$B" "$R" -name comparison.json -path "*$NS*" 2>/dev/null | head -1)
  [ -n "$f" ] && cp "$f" "$O/comparison.json" && cp "$(dirname "$f")/comparison.md" "$O/comparison.md"
  cd "$R"; tail -n 3 "$O/gpu-check.txt" "$O/compare.txt";;
checks)
  { for op in $OPS; do for s in $(python3 -c "import mage,sys; print(' '.join(s['name'] for s in mage.op_info(sys.argv[1])['stages']))" $op) current; do ./mage run $op --stage $s; echo "exit $?"; done; done; } > "$O/run.txt" 2>&1
  timeout 150 python3 python/gpu_checks/torch_ops.py > "$O/torch-ops.txt" 2>&1; echo "exit $?" >> "$O/torch-ops.txt"
  { for op in $OPS; do timeout 300 ./mage sanitize $op; echo "exit $?"; done; } > "$O/sanitize.txt" 2>&1
  cd "$R"; tail -n 4 "$O/torch-ops.txt" "$O/sanitize.txt"; echo "run: $(grep -c 'exit 0' "$O/run.txt") exit 0, $(grep -c 'exit [1-9]' "$O/run.txt") other";;
esac
