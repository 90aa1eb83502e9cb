#!/usr/bin/env bash
# The GPU checks behind results/checks-2, run from the checkout's root with
# the bundle (`cargo xtask bundle`) in dist/mage: OUT names the folder the
# logs go to. Builds nothing. Every check goes through runtime::gpu::Context.
set -u
O=${OUT:?}
R=$PWD
B=$R/dist/mage
export PYTHONUNBUFFERED=1 PYTHONPATH=$B/python:$R/python
cd "$B"
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/gpu-check.txt" 2>&1
./mage doctor >> "$O/gpu-check.txt" 2>&1
# gpu-check: the numerical contract; every stage on the GPU against the emulator and the f64 reference.
./mage gpu-check >> "$O/gpu-check.txt" 2>&1; echo "exit $?" >> "$O/gpu-check.txt"
# run of every op at its default dims (neighbor on both generators), with the three instruments.
{
  for op in matmul layernorm gelu triangle; do ./mage run $op; echo "exit $?"; done
  for g in uniform power-law; do ./mage run neighbor --gen $g; echo "exit $?"; done
} > "$O/run.txt" 2>&1
# A tensor on cuda:N launches on device N: every op, on every visible device.
args=()
for spec in matmul:96,80,72 layernorm:64,768 gelu:64,768 triangle:32,8 neighbor:128,16,1024; do
  op=${spec%%:*}; d=${spec#*:}; c=/tmp/case-$op; rm -rf "$c"
  ./mage fixtures $op --dims $d --out "$c" > /dev/null && args+=("$op=$c")
done
python3 "$R/python/gpu_checks/device_index.py" "${args[@]}" > "$O/device-index.txt" 2>&1; echo "exit $?" >> "$O/device-index.txt"
# The README's PyTorch example, as written there.
sed -n '/mage:example pytorch/,/^```$/p' "$R/README.md" | sed '1,2d;$d' > /tmp/example.py
{ cat /tmp/example.py; echo "--- output:"; python3 /tmp/example.py; echo "exit $?"; } > "$O/readme-example.txt" 2>&1
# A quick comparison of every op: the harness through the module and the new context.
timeout 300 ./mage compare --quick --namespace checks-2-quick > "$O/compare-quick.txt" 2>&1; echo "exit $?" >> "$O/compare-quick.txt"
f=$(find "$B" "$R" -name comparison.json -path '*checks-2-quick*' 2>/dev/null | head -1); [ -n "$f" ] && cp "$f" "$O/comparison-quick.json"
cd "$R"
tail -n 2 "$O"/gpu-check.txt "$O"/device-index.txt "$O"/readme-example.txt "$O"/compare-quick.txt
echo "run: $(grep -c 'exit 0' "$O/run.txt") exit 0, $(grep -c 'exit [1-9]' "$O/run.txt") other"
