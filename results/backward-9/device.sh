#!/usr/bin/env bash
# The GPU evidence behind results/backward-9, results/nsight-3 and results/backward-11 to results/backward-14, run from the checkout's root with the
# bundle (`cargo xtask bundle`) in dist/mage (its binary and python/) and the expecttest wheel in .whl/; OUT names the folder the
# logs go to, PART which batch:
#   final:   alone, one after another: the host time per call (python/gpu_checks/host_time.py), the
#            end-to-end harness (`python3 -m mage_e2e`, what `cargo xtask e2e` runs; kept here with
#            `cargo xtask e2e --namespace e2e-2 --from e2e.json`); then the package's PyTorch checks
#            (python/gpu_checks/torch_ops.py: opcheck, OpInfo, compile, CUDA graphs; not timed).
#   compare: `mage compare $OPS --sweep --mode hot` into namespace $NS, $AT workloads beside them,
#            $JUDGE pairs judged (each a list of `--at`/`--judge` flags); logs in $OUT's $NS/.
#   compare2: the same with OPS2, NS2, AT2, JUDGE2.
#   With OPS and SWEEP set empty, compare runs only the $AT workloads.
#   checks:  gpu-check, compute-sanitizer (four tools) and `run` of every stage of $OPS
#            (only the stages in $SAN_STAGES, `op:stage` words, where an op is named there),
#            and compute-sanitizer's four tools on each `run` in $SAN_RUNS (`op:stage:dims` words).
#   host:    alone, the host time per call (python/gpu_checks/host_time.py); then, beside the checks of
#            `checks` if PART names it right after, the package's PyTorch checks (torch_ops.py; not timed).
#   nsight:  alone, `mage nsight` (Nsight Compute, clocks untouched) of each `op:stage:dims` word of $NSIGHT,
#            into $OUT's nsight/.
# PART may name several batches, run in that order. Builds nothing. The logs come back as one archive, $OUT/logs.tgz.
set -u
: "${OUT:?}"
O=/tmp/logs; rm -rf $O; mkdir -p $O
trap 'tar -C $O -czf "$OUT/logs.tgz" .' EXIT
R=$PWD
B=$R/dist/mage
# The bundle may travel packed (`tar -C dist -cJf dist/bundle.tar.xz mage/mage mage/python`).
[ -f "$R/dist/bundle.tar.xz" ] && tar -C "$R/dist" -xJf "$R/dist/bundle.tar.xz"
# The bundle travels without its copy of fixtures/ (the checkout's is the same files).
[ -d "$B/fixtures" ] || cp -r "$R/fixtures" "$B/fixtures"
export PYTHONUNBUFFERED=1 PYTHONPATH=$B/python:$R/python
[ -d "$R/.whl" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$R"/.whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
cd "$B"
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/gpu.txt" 2>&1
stages() { python3 -c "import mage,sys; print(' '.join(s['name'] for s in mage.op_info(sys.argv[1])['stages']))" "$1"; }
for part in ${PART:?}; do
case $part in
final)
  { timeout 90 python3 "$R/python/gpu_checks/host_time.py"; echo "exit $?"; } > "$O/host-time.txt" 2>&1
  { timeout ${E2E_LIMIT:-280} python3 -m mage_e2e --out "$O/e2e.json" ${E2E_ARGS:-}; echo "exit $?"; } > "$O/e2e.txt" 2>&1
  { timeout ${CHECKS_LIMIT:-200} python3 "$R/python/gpu_checks/torch_ops.py" --no-host-time; echo "exit $?"; } > "$O/torch-ops.txt" 2>&1
  cd "$R"; tail -n 4 "$O/e2e.txt" "$O/torch-ops.txt"; grep INFO "$O/host-time.txt" | cut -c1-140; cd "$B";;
compare|compare2)
  # compare2 reads OPS2, NS2, AT2, JUDGE2 and COMPARE2_LIMIT: a second namespace in the same call.
  if [ $part = compare2 ]; then ops=${OPS2-}; ns=${NS2:?}; at=${AT2:-}; judge=${JUDGE2:-}; lim=${COMPARE2_LIMIT:-540}
  else ops=${OPS-}; ns=${NS:?}; at=${AT:-}; judge=${JUDGE:-}; lim=${COMPARE_LIMIT:-540}; fi
  sweep=${SWEEP---sweep}   # SWEEP= (empty) with OPS= (empty): only the $AT workloads
  mkdir -p "$O/$ns"
  timeout $lim ./mage compare $ops $sweep --mode hot $at $judge --namespace $ns > "$O/$ns/compare.txt" 2>&1; echo "exit $?" >> "$O/$ns/compare.txt"
  f=$(find "$B" "$R" -name comparison.json -path "*$ns*" 2>/dev/null | head -1)
  [ -z "$f" ] && f=$(find /tmp -name comparison.json -path "*mage-compare-$ns*" 2>/dev/null | head -1)   # a stopped run's partial evidence
  [ -n "$f" ] && cp "$f" "$O/$ns/comparison.json" && cp "$(dirname "$f")"/*.md "$(dirname "$f")"/manifest.json "$O/$ns/" 2>/dev/null
  cd "$R"; tail -n 3 "$O/$ns/compare.txt"; cd "$B";;
host)
  { timeout 90 python3 "$R/python/gpu_checks/host_time.py"; echo "exit $?"; } > "$O/host-time.txt" 2>&1
  grep INFO "$O/host-time.txt" | cut -c1-140
  ( timeout ${CHECKS_LIMIT:-200} python3 "$R/python/gpu_checks/torch_ops.py" --no-host-time > "$O/torch-ops.txt" 2>&1; echo "exit $?" >> "$O/torch-ops.txt" ) &
  TORCH_OPS=$!;;
nsight)
  mkdir -p "$O/nsight"
  for w in ${NSIGHT:?}; do IFS=: read -r op st dims <<< "$w"
    echo "== $op $st $dims"; timeout ${NSIGHT_LIMIT:-90} ./mage nsight $op --stage $st --dims $dims --out "$O/nsight" > /dev/null 2>&1; echo "exit $?"
  done > "$O/nsight/nsight.txt" 2>&1
  cd "$R"; grep -c "exit 0" "$O/nsight/nsight.txt"; cd "$B";;
checks)
  export MAGE_GPU_LOCK_HELD=1   # nothing here is timed: the checks share the GPU on purpose
  { timeout 300 ./mage gpu-check ${OPS:?}; echo "exit $?"; } > "$O/gpu-check.txt" 2>&1 &
  for op in $OPS; do
    picked=$(for w in ${SAN_STAGES:-}; do [ "${w%%:*}" = "$op" ] && echo "--stage ${w#*:}"; done)
    if [ -n "$picked" ]; then
      { for f in $(echo $picked | sed 's/--stage //g'); do timeout 300 ./mage sanitize $op --stage $f; echo "exit $?"; done; } > "$O/sanitize-$op.txt" 2>&1 &
    else
      { timeout 300 ./mage sanitize $op; echo "exit $?"; } > "$O/sanitize-$op.txt" 2>&1 &
    fi
  done
  { for w in ${SAN_RUNS:-}; do IFS=: read -r op st dims <<< "$w"
      for tool in memcheck racecheck synccheck initcheck; do
        echo "== $tool $op $st $dims"; timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 ./mage run $op --stage $st --dims $dims --no-timing 2>&1 | tail -n 3; echo "exit ${PIPESTATUS[0]}"
      done; done; } > "$O/sanitize-runs.txt" 2>&1 &
  { for op in $OPS; do for s in $(stages $op) current; do echo "== $op $s"; timeout 60 ./mage run $op --stage $s; echo "exit $?"; done; done; } > "$O/run.txt" 2>&1 &
  wait
  cd "$R"; tail -n 3 "$O/gpu-check.txt"; for f in "$O"/sanitize-*.txt; do echo "$f: $(tail -1 $f)"; done
  echo "run: $(grep -c 'exit 0' "$O/run.txt") exit 0, $(grep -c 'exit [1-9]' "$O/run.txt") other"
  echo "sanitize-runs: $(grep -c 'exit 0' "$O/sanitize-runs.txt") exit 0, $(grep -c 'exit [1-9]' "$O/sanitize-runs.txt") other"
  cd "$B";;
esac
done
if [ -n "${TORCH_OPS:-}" ]; then wait $TORCH_OPS 2>/dev/null; tail -n 2 "$O/torch-ops.txt"; fi
