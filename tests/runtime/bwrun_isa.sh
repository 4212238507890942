#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# BW_CPU_ISA through bwrun: at each level this CPU runs, bwrun says which kernels run and the MLP's
# outputs agree with the default level's; a level above the CPU and a value that names no level stop
# bwrun with one line saying why (exit 1). --precision bf16 runs at the amx level (outputs within
# bf16's rounding of fp32's) and is refused below it with one line.
#   bwrun_isa.sh BWRUN MLP.onnx
set -u
bwrun="$1"
model="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
unset BW_CPU_ISA
mkdir -p "$tmp/default"
"$bwrun" --batch 5 --seed 3 --output-dir "$tmp/default" "$model" > "$tmp/default.txt" 2>&1 ||
	{ cat "$tmp/default.txt"; exit 1; }
grep "^cpu    kernels" "$tmp/default.txt" || { echo "FAIL: bwrun does not say which kernels run"; exit 1; }
cpu=$(sed -n 's/^cpu    kernels .*this CPU runs up to \([a-z0-9]*\).*/\1/p' "$tmp/default.txt")
rank() { case "$1" in baseline) echo 0 ;; avx2) echo 1 ;; avx512) echo 2 ;; amx) echo 3 ;; esac; }
for level in baseline avx2 avx512 amx; do
	mkdir -p "$tmp/$level"
	if BW_CPU_ISA=$level "$bwrun" --batch 5 --seed 3 --output-dir "$tmp/$level" "$model" > "$tmp/$level.txt" 2>&1; then
		[ "$(rank "$level")" -le "$(rank "$cpu")" ] || { echo "FAIL: $level ran on a CPU that runs up to $cpu"; exit 1; }
		grep "^cpu    kernels" "$tmp/$level.txt"
		grep -q "^cpu    kernels .*BW_CPU_ISA=$level" "$tmp/$level.txt" || { echo "FAIL: $level not reported"; exit 1; }
		python3 - "$tmp/default" "$tmp/$level" <<'PY' || exit 1
import glob, os, sys
import numpy as np
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.npy"))):
    want, got = np.load(f), np.load(os.path.join(sys.argv[2], os.path.basename(f)))
    err = float(np.abs(want - got).max() / max(np.abs(want).max(), 1e-30))
    print(f"  {os.path.basename(f)}: max error / scale against the default level {err:.3g}")
    if want.shape != got.shape or not np.isfinite(got).all() or err > 1e-5:
        sys.exit("FAIL: outputs differ between levels")
PY
	else
		cat "$tmp/$level.txt"
		[ "$(rank "$level")" -gt "$(rank "$cpu")" ] || { echo "FAIL: $level refused on a CPU that runs up to $cpu"; exit 1; }
		grep -q "this CPU lacks" "$tmp/$level.txt" || { echo "FAIL: the refusal does not say why"; exit 1; }
	fi
done
for level in avx512 amx; do
	[ "$(rank "$level")" -le "$(rank "$cpu")" ] || continue
	mkdir -p "$tmp/bf16-$level"
	if BW_CPU_ISA=$level "$bwrun" --precision bf16 --batch 5 --seed 3 --output-dir "$tmp/bf16-$level" "$model" \
		> "$tmp/bf16-$level.txt" 2>&1; then
		[ "$level" = amx ] || { echo "FAIL: bf16 ran at $level"; exit 1; }
		grep "^cpu    precision bf16" "$tmp/bf16-$level.txt" || { echo "FAIL: bf16 not reported"; exit 1; }
		python3 - "$tmp/default" "$tmp/bf16-$level" <<'PY' || exit 1
import glob, os, sys
import numpy as np
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.npy"))):
    want, got = np.load(f), np.load(os.path.join(sys.argv[2], os.path.basename(f)))
    err = float(np.abs(want - got).max() / max(np.abs(want).max(), 1e-30))
    print(f"  {os.path.basename(f)}: bf16, max error / scale against fp32 {err:.3g}")
    # three layers of 8-bit mantissas: a few parts in a thousand; a wrong tile would be order 1
    if want.shape != got.shape or not np.isfinite(got).all() or err > 2e-2 or err == 0:
        sys.exit("FAIL: bf16 outputs are not fp32's within bf16 rounding")
PY
	else
		cat "$tmp/bf16-$level.txt"
		[ "$level" != amx ] || { echo "FAIL: bf16 refused at amx"; exit 1; }
		grep -q "precision bf16 needs the CPU kernels at the amx level" "$tmp/bf16-$level.txt" ||
			{ echo "FAIL: the bf16 refusal does not say why"; exit 1; }
	fi
done
if "$bwrun" --precision fp16 "$model" > "$tmp/fp16.txt" 2>&1; then
	echo "FAIL: --precision fp16 was accepted for the CPU"
	exit 1
fi
grep -q "the GPU's: --device cpu takes fp32 or bf16" "$tmp/fp16.txt" || { cat "$tmp/fp16.txt"; echo "FAIL: fp16 refusal"; exit 1; }
if BW_CPU_ISA=sse9 "$bwrun" "$model" > "$tmp/bad.txt" 2>&1; then
	echo "FAIL: BW_CPU_ISA=sse9 was accepted"
	exit 1
fi
cat "$tmp/bad.txt"
grep -q "not one of baseline, avx2, avx512, amx" "$tmp/bad.txt" || { echo "FAIL: no reason given"; exit 1; }
echo "PASS"
