#!/usr/bin/env bash
# The GPU evidence behind results/backward-5 (and the end-to-end run, results/e2e-1), run from the checkout's root
# with the bundle (`cargo xtask bundle`) in dist/mage (or its binary and
# fixtures only, with the wheel, `cargo xtask wheel`, in dist/); OUT names the folder
# the logs go to, PART which batch:
#   checks:  at once: the package's PyTorch checks (python/gpu_checks/
#            torch_ops.py), gpu-check of the gradient and transposed ops,
#            compute-sanitizer (four tools) of each, `run` of each of their
#            stages; then alone the host time per call (host_time.py), and
#            the wheel (dist/mage-*.whl) installed into an empty folder.
#   compare: compare of the gradient ops, the transposed products and
#            gelu_erf in namespace $NS, matmul at 1024³ and 4096³ and LayerNorm
#            at 4096x768 beside them, matmul_tn at weight-gradient shapes, the
#            new stages judged against the ones they would replace.
#   final:   host time per call, the end-to-end run (both alone), then the
#            package's checks.
#   e2e:     the end-to-end command (`mage e2e`) into namespace $E2E_NS
#            (default e2e-1; E2E_ARGS adds flags, such as --quick).
# Builds nothing. The logs come back as one archive, $OUT/logs.tgz.
set -u
: "${OUT:?}"
O=/tmp/logs; rm -rf $O; mkdir -p $O
trap 'tar -C $O -czf "$OUT/logs.tgz" .' EXIT
R=$PWD
B=$R/dist/mage
# The package: the bundle's, or where the bundle carries only its binary, the wheel installed into an empty folder.
W=$(ls "$R"/dist/mage-*.whl 2>/dev/null | head -1)
if [ -d "$B/python/mage" ]; then PY=$B/python; else rm -rf /tmp/wheel-site; python3 -m pip install -q --no-index --no-deps --target /tmp/wheel-site "$W"; PY=/tmp/wheel-site; fi
export PYTHONUNBUFFERED=1 PYTHONPATH=$PY:$R/python
[ -d "$R/.whl" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$R"/.whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
cd "$B"
OPS=${OPS:-"layernorm_backward gelu_backward gelu_erf_backward triangle_backward neighbor_backward matmul_nt matmul_tn gelu_erf"}
NS=${NS:-backward-5}
stages() { python3 -c "import mage,sys; print(' '.join(s['name'] for s in mage.op_info(sys.argv[1])['stages']))" "$1"; }
case ${PART:?} in
checks)
  nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/gpu.txt" 2>&1
  export MAGE_GPU_LOCK_HELD=1   # the batch below shares the GPU on purpose: nothing in it is timed but host_time, run alone after it
  { timeout 400 python3 "$R/python/gpu_checks/torch_ops.py" --no-host-time; echo "exit $?"; } > "$O/torch-ops.txt" 2>&1 &
  { timeout 300 ./mage gpu-check $OPS; echo "exit $?"; } > "$O/gpu-check.txt" 2>&1 &
  for op in $OPS; do { timeout 300 ./mage sanitize $op; echo "exit $?"; } > "$O/sanitize-$op.txt" 2>&1 & done
  # matmul_tn mage-004 split in slices (sanitize's own shapes give it one slice): the four tools by hand.
  { for t in memcheck racecheck synccheck initcheck; do echo "== $t matmul_tn mage-004 64,64,4096"; timeout 120 compute-sanitizer --tool $t --error-exitcode 97 ./mage run matmul_tn --stage mage-004 --dims 64,64,4096 --no-timing 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"; done; } > "$O/sanitize-matmul_tn-split.txt" 2>&1 &
  # layernorm_backward mage-005's wider entries (the differential and sanitize shapes reach its narrowest only), and matmul_tn mage-004 split.
  { for d in 37,1025 19,2050 5,4096 2,4093 3,8192 2,8191 1024,2048 4096,4096 16384,4096; do echo "== layernorm_backward mage-005 $d"; timeout 40 ./mage run layernorm_backward --stage mage-005 --dims $d; echo "exit $?"; done
    for d in 64,64,4096 32,64,4096 128,128,65536 64,128,65536 768,768,4096 256,256,16384 1024,1024,1 37,29,1500; do echo "== matmul_tn mage-004 $d"; timeout 40 ./mage run matmul_tn --stage mage-004 --dims $d; echo "exit $?"; done
    for t in memcheck racecheck synccheck; do for d in 64,4096 19,2050 16,8192; do echo "== $t layernorm_backward mage-005 $d"; timeout 90 compute-sanitizer --tool $t --error-exitcode 97 ./mage run layernorm_backward --stage mage-005 --dims $d --no-timing 2>&1 | tail -3; echo "exit ${PIPESTATUS[0]}"; done; done; } > "$O/wide.txt" 2>&1 &
  { for op in $OPS; do for s in $(stages $op) current; do echo "== $op $s"; timeout 60 ./mage run $op --stage $s; echo "exit $?"; done; done; } > "$O/run.txt" 2>&1 &
  wait
  unset MAGE_GPU_LOCK_HELD
  { timeout 120 python3 "$R/python/gpu_checks/host_time.py"; echo "exit $?"; } > "$O/host-time.txt" 2>&1
  # The wheel on its own: installed into an empty folder, nothing else on the path.
  if [ -n "$W" ]; then
    { echo "wheel $(basename "$W")"; rm -rf /tmp/wheel-only; python3 -m pip install -q --no-index --no-deps --target /tmp/wheel-only "$W" && cd /tmp &&
      PYTHONPATH=/tmp/wheel-only python3 -c "
import torch, mage
x = torch.randn(4096, 768, device='cuda', requires_grad=True); m = torch.nn.LayerNorm(768).cuda(); n = mage.nn.LayerNorm(768).cuda(); n.load_state_dict(m.state_dict())
y = n(x); y.backward(torch.ones_like(y)); g = x.grad.clone(); x.grad = None; m(x).backward(torch.ones_like(y))
torch.testing.assert_close(y, m(x)); torch.testing.assert_close(g, x.grad, atol=1e-4, rtol=1e-4)
print('mage from', mage.__file__); print('ops', mage.ops()); print('mage.nn.LayerNorm forward and backward match torch.nn.LayerNorm at 4096x768')"; echo "exit $?"; cd "$B"; } > "$O/wheel.txt" 2>&1
  fi
  cd "$R"; tail -n 3 "$O/torch-ops.txt" "$O/gpu-check.txt" "$O/wheel.txt" "$O/host-time.txt"; for f in "$O"/sanitize-*.txt; do echo "$f: $(grep -c ' ok ' $f) ok, $(grep -c FAILED $f) failed, $(tail -1 $f)"; done
  echo "run: $(grep -c 'exit 0' "$O/run.txt") exit 0, $(grep -c 'exit [1-9]' "$O/run.txt") other"; echo "wide: $(grep -c 'exit 0' "$O/wide.txt") exit 0, $(grep -c 'exit [1-9]' "$O/wide.txt") other";;
compare)
  timeout ${COMPARE_LIMIT:-570} ./mage compare $OPS --sweep --mode hot --at matmul:1024,1024,1024 --at matmul:4096,4096,4096 --at layernorm:4096,768 \
    --at matmul_tn:64,64,4096 --at matmul_tn:128,128,65536 --at matmul_tn:64,128,65536 --at matmul_tn:768,768,4096 \
    --judge layernorm_backward:mage-005:mage-003 --judge matmul_tn:mage-004:mage-001 --judge matmul_tn:mage-004:mage-002 \
    --namespace $NS > "$O/compare.txt" 2>&1; echo "exit $?" >> "$O/compare.txt"
  f=$(find "$B" "$R" -name comparison.json -path "*$NS*" 2>/dev/null | head -1)
  [ -z "$f" ] && f=$(find /tmp -name comparison.json -path "*mage-compare-$NS*" 2>/dev/null | head -1)   # a stopped run's partial evidence
  [ -n "$f" ] && cp "$f" "$O/comparison.json" && cp "$(dirname "$f")"/*.md "$(dirname "$f")"/manifest.json "$O/" 2>/dev/null
  cd "$R"; tail -n 3 "$O/compare.txt";;
e2e)
  timeout ${E2E_LIMIT:-540} ./mage e2e --namespace ${E2E_NS:-e2e-1} ${E2E_ARGS:-} > "$O/e2e.txt" 2>&1; echo "exit $?" >> "$O/e2e.txt"
  d=$B/results/${E2E_NS:-e2e-1}; [ -d "$d" ] && cp "$d"/* "$O/"
  cd "$R"; tail -n 5 "$O/e2e.txt";;
final)
  # Timed parts alone, one after another: host time per call, the end-to-end run; then the package's checks (not timed).
  { timeout 60 python3 "$R/python/gpu_checks/host_time.py"; echo "exit $?"; } > "$O/host-time.txt" 2>&1
  # The harness itself (what `mage e2e` runs), so that a stopped run leaves what it measured; `cargo xtask e2e --from` keeps it.
  { timeout ${E2E_LIMIT:-280} python3 -m mage_e2e --out "$O/e2e.json" ${E2E_ARGS:-}; echo "exit $?"; } > "$O/e2e.txt" 2>&1
  { timeout ${CHECKS_LIMIT:-220} python3 "$R/python/gpu_checks/torch_ops.py" --no-host-time; echo "exit $?"; } > "$O/torch-ops.txt" 2>&1
  cd "$R"; tail -n 4 "$O/e2e.txt" "$O/torch-ops.txt"; grep INFO "$O/host-time.txt" | cut -c1-120;;
esac
