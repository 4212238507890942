#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bwrun --device gpu on the fake device (the GPU executor, compile, batch table and launch, run on the
# CPU) against bwrun on the CPU, for the MLP at batch 3; and, with the CUDA module on a host without a
# device, the one-line refusal that says so.
#   bwrun_gpu.sh BWRUN MLP.onnx [CUDA_MODULE]
set -u
bwrun="$1"
model="$2"
module="${3:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
mkdir -p "$tmp/cpu" "$tmp/gpu"
"$bwrun" --batch 3 --seed 5 --output-dir "$tmp/cpu" "$model" > "$tmp/cpu.txt" 2>&1 || { cat "$tmp/cpu.txt"; exit 1; }
"$bwrun" --device gpu --gpu-module fake --batch 3 --seed 5 --repeat 2 --output-dir "$tmp/gpu" "$model" \
	> "$tmp/gpu.txt" 2>&1 || { cat "$tmp/gpu.txt"; exit 1; }
grep -E "^(ops|plan|device|model=)" "$tmp/gpu.txt"
tail -n 1 "$tmp/gpu.txt" | grep -q "device=gpu" || { echo "FAIL: last line has no device=gpu"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import glob, os, sys
import numpy as np
d = sys.argv[1]
files = sorted(glob.glob(os.path.join(d, "cpu", "*.npy")))
assert files, "bwrun wrote no outputs"
for f in files:
    cpu = np.load(f)
    gpu = np.load(os.path.join(d, "gpu", os.path.basename(f)))
    assert cpu.shape == gpu.shape, (cpu.shape, gpu.shape)
    err = float(np.abs(cpu - gpu).max() / max(np.abs(cpu).max(), 1e-30))
    print(f"{os.path.basename(f)}: {cpu.shape}, max error / scale {err:.3g}")
    if not np.isfinite(gpu).all() or err > 1e-4:
        print("FAIL: the fake GPU's output differs from the CPU's")
        sys.exit(1)
PY
if [ -n "$module" ]; then
	# no driver and no device here: the real module must say so in one line, exit 1
	if "$bwrun" --device gpu --gpu-module "$module" "$model" > "$tmp/cuda.txt" 2>&1; then
		echo "note: a CUDA device is present; the refusal check does not apply"
	else
		tail -n 1 "$tmp/cuda.txt"
		grep -q "no CUDA device present\|CUDA" "$tmp/cuda.txt" || { echo "FAIL: no reason given"; exit 1; }
	fi
fi
echo "PASS"
