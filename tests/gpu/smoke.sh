#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The GPU smoke test, for a machine with an NVIDIA GPU (about a minute on an H200):
#   tests/gpu/smoke.sh BIN_DIR [RESULTS_DIR]
# BIN_DIR: a build directory, or a bundle made by tests/gpu/bundle.sh (for a machine without this
# project's build dependencies). Run from the source tree's root (models/gen_models.py is used).
#  1. bwgpu-info finds a device;
#  2. test_gpu_cuda: host registration, completion words, programs captured as graphs and launched,
#     results against program_math.h on the CPU (a SKIP is a failure here);
#  3. the MLP, the small CNN and the MiniLM-shaped encoder at batch 1 and 8, on the GPU (bwrun
#     --device gpu) and on the CPU (bwrun), compared output by output: max abs error within 1e-4 of
#     the output's scale.
# Each stage appends to RESULTS_DIR/smoke.txt as it goes, so a later failure keeps earlier results.
# cuBLASLt: libcublasLt.so.13 from the loader's path, or pip's nvidia-cublas package (found here);
# cuDNN likewise (libcudnn.so.9, pip's nvidia-cudnn-cu13), optional: BW_CUDNN_LOG=1 has the module
# print each CONV op's plan, or why CONV runs on the generic kernel, into the log.
set -u
bin="${1:-build}"
res="${2:-/tmp/bw-smoke}"
mkdir -p "$res"
log="$res/smoke.txt"
: > "$log"
say() { echo "$*" | tee -a "$log"; }
find_bin() { for p in "$bin/$1" "$bin/app/$1" "$bin/gpu/$1" "$bin/tests/gpu/$1"; do [ -e "$p" ] && { echo "$p"; return; }; done; echo "$bin/$1"; }

[ -d "$bin/lib" ] && export LD_LIBRARY_PATH="$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pip_libs=$(python3 -c 'import os, nvidia; print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p) if os.path.isdir(os.path.join(p, d, "lib"))))' 2>/dev/null)
[ -n "$pip_libs" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$pip_libs"
export OPENBLAS_NUM_THREADS=1
module=$(find_bin libbwgpu.so)
bwrun=$(find_bin bwrun)
fail=0

say "== 1. bwgpu-info"
info=$("$(find_bin bwgpu-info)" --module "$module" 2>&1)
rc=$?
say "$info"
[ $rc -eq 0 ] || { say "smoke: bwgpu-info found no device (exit $rc)"; exit 1; }

say "== 2. test_gpu_cuda"
BW_CUDNN_LOG=1 "$(find_bin test_gpu_cuda)" "$module" >> "$log" 2>&1
rc=$?
grep -E "Run Summary|asserts|tests|Test:.*FAILED" "$log" | tail -4
[ $rc -eq 0 ] || { say "smoke: test_gpu_cuda exit $rc (77 = no device)"; fail=1; }

say "== 3. models: GPU against CPU"
mkdir -p "$res/models"
python3 models/gen_models.py --out "$res/models" mlp cnn minilm >> "$log" 2>&1 || { say "smoke: gen_models.py failed"; exit 1; }
for model in mlp cnn minilm; do
	for batch in 1 8; do
		d="$res/$model-b$batch"
		mkdir -p "$d/cpu" "$d/gpu"
		"$bwrun" --batch $batch --seed 1 --output-dir "$d/cpu" "$res/models/$model.onnx" > "$d/cpu.txt" 2>&1 ||
			{ say "smoke: $model b$batch CPU: $(tail -1 "$d/cpu.txt")"; fail=1; continue; }
		BW_CUDNN_LOG=1 "$bwrun" --device gpu --gpu-module "$module" --batch $batch --seed 1 --warmup 5 \
			--repeat 50 --output-dir "$d/gpu" "$res/models/$model.onnx" > "$d/gpu.txt" 2>&1 ||
			{ say "smoke: $model b$batch GPU: $(tail -1 "$d/gpu.txt")"; fail=1; continue; }
		grep "^device" "$d/gpu.txt" | tee -a "$log"
		grep "^cudnn: .*CONV ops planned" "$d/gpu.txt" | tee -a "$log"
		tail -1 "$d/gpu.txt" | tee -a "$log"
		python3 - "$d" "$model" "$batch" > "$d/compare.txt" 2>&1 <<'PY' || fail=1
import glob, os, sys
import numpy as np
d, model, batch = sys.argv[1:]
worst = 0.0
for f in sorted(glob.glob(os.path.join(d, "cpu", "*.npy"))):
    cpu = np.load(f).astype(np.float64)
    gpu = np.load(os.path.join(d, "gpu", os.path.basename(f))).astype(np.float64)
    scale = max(np.abs(cpu).max(), 1e-30)
    err = np.abs(cpu - gpu).max() / scale
    worst = max(worst, err)
ok = worst <= 1e-4
print(f"{model} b{batch}: max error / scale {worst:.3g} {'ok' if ok else 'TOO LARGE'}")
sys.exit(0 if ok else 1)
PY
		say "$(cat "$d/compare.txt")"
	done
done
[ $fail -eq 0 ] && say "smoke: passed" || say "smoke: FAILED"
exit $fail
