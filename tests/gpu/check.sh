#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The GPU check, for a machine with an NVIDIA GPU (the H200 lent to some sessions; at most
# CHECK_BUDGET_S, 300 s by default, so that the check and a rerun of it fit 10 minutes of a device
# lease; the rerun, with CHECK_RESNET_DIR, skips the ResNet-50 export):
#   tests/gpu/check.sh [BIN_DIR [RESULTS_DIR]]
# Run from the source tree's root. BIN_DIR: a build directory, or a bundle made by tests/gpu/bundle.sh
# (for a machine without DPDK or this project's build dependencies; by default gpu-bundle/ in the
# tree, git-ignored, so a GPU machine that receives only the tree has it); RESULTS_DIR defaults to
# gpu-check/ (ignored too). Our binaries run with the bundle's lib/ and pip's nvidia/*/lib (cuBLAS,
# cuDNN) on LD_LIBRARY_PATH, and BW_CUDNN_LOG=1: cuDNN's plan count per program (and why it did not
# load, when it did not) comes into check.txt. On a fresh GPU machine:
#   tests/gpu/bundle.sh build                      # here, on the build machine: gpu-bundle/
#   tests/gpu/check.sh                             # there, in the source tree: gpu-check/check.txt
#   CHECK_RESNET_DIR=gpu-check/resnet50 tests/gpu/check.sh gpu-bundle gpu-check2   # the rerun
# Stages, each appending to RESULTS_DIR/check.txt as it goes (a failure later keeps what came before;
# every command runs under `timeout`, and a failed stage is recorded and the next one runs):
#  1. smoke: bwgpu-info; test_gpu_cuda; launch_cost (host time inside cudaLaunchKernel and
#     cudaGraphLaunch); bench gpu_gather (the gather and scatter kernels' GB/s from registered host
#     memory); bench gpu_launch on the MLP in graph and doorbell modes (system calls per batch).
#  2. the MLP and the MiniLM-shaped encoder, FP32 and FP16, batch 1 and 8 (and 32 for the MLP), bwrun on
#     the GPU against bwrun on the CPU, compared with numpy (tolerances below).
#  3. torchvision's ResNet-50 (tests/gpu/resnet50_onnx.py, seeded, no download; onnxruntime's outputs as
#     the reference): gpu_launch FP16 (and FP32) at batch 1, 8, 32; bwrun FP16 and FP32 against
#     onnxruntime.
#  4. the peer: tests/gpu/torch_peer.py, the same ResNet-50 in PyTorch FP16, channels_last, cuDNN
#     benchmark mode, one CUDA graph per batch size, replayed.
# The last line is machine-readable ('na' where a value could not be measured):
#   resnet50_fp16_b1_ms=<x> e2e_vs_graph=<x> vs_torch_graph=<x> launch_vs_kernel=<x> syscalls_per_batch=<n> \
#   gather_gbps=<x> graph_launch_threads_ratio=<x>   (one line; the last: cudaGraphLaunch's host time
#   per launch with 8 threads launching at once ÷ with one, what the context's locks cost lcores)
# CHECK_GPU_MODULE=PATH|fake picks the module (default: BIN_DIR's libbwgpu.so); with 'fake' the script
# runs end to end on the fake device (few iterations, ResNet-50 at batch 1 only), which is how it is
# tried on hosts without a GPU. CHECK_RESNET_DIR=DIR reuses resnet50_onnx.py's output of an earlier run
# (DIR/resnet50.onnx, input_bN.npy, ref_bN.npy) instead of exporting again: a rerun saves a minute.
set -u

bin="${1:-gpu-bundle}"
res="${2:-gpu-check}"
if [ ! -d "$bin" ]; then
	echo "usage: tests/gpu/check.sh [BIN_DIR [RESULTS_DIR]]   (from the source root; BIN_DIR a build dir or a" \
		"bundle, gpu-bundle/ by default: tests/gpu/bundle.sh BUILD_DIR makes it; $bin is not there)" >&2
	exit 2
fi
[ -f models/gen_models.py ] || { echo "check.sh: run it from the source tree's root (models/gen_models.py)" >&2; exit 2; }

# Tolerances, as max |gpu - reference| / max |reference| over an output:
# - FP32 on the GPU against the CPU backend: the smoke test's 1e-4. Both accumulate in fp32 and
#   cuBLASLt runs without TF32, but the summation order differs and nvcc contracts a*b+c into FMAs.
TOL_FP32=1e-4
# - FP16: half precision keeps 11 significant bits (unit roundoff 4.9e-4); weights and activations are
#   rounded at every layer (accumulation stays fp32), so errors of a few units in the last place add up
#   over the layers. 2e-2 of the output's scale is about 40 such roundings at the largest output.
TOL_FP16=2e-2
# - ResNet-50 FP32 against onnxruntime's CPU outputs: 1e-3, looser than TOL_FP32 because 53
#   convolutions deep, two different libraries' algorithms (cuDNN's may be Winograd or FFT based,
#   onnxruntime's im2col + its own GEMM) round differently, and the differences grow with depth.
TOL_RESNET_FP32=1e-3

BUDGET_S="${CHECK_BUDGET_S:-300}"
# Shares of the budget, cumulative: a stage ends by start + budget * its share, so time a stage does
# not use goes to the ones after it, and an overrunning stage cannot starve the peer (stage 4).
SHARE_END=(0 20 40 80 100) # percent, stages 1..4

mkdir -p "$res/logs" || { echo "check.sh: cannot make $res" >&2; exit 2; }
log="$res/check.txt"
: > "$log"
# the files the last line is read from: a step that does not run this time must not leave last time's
rm -f "$res"/gpu_launch_*.txt "$res/torch_peer.txt" "$res/logs/launch_cost.txt" "$res/logs/gpu_gather.txt"
say() { echo "$*" | tee -a "$log"; }
note_fail() {
	say "FAILED stage $1: $2"
	case " $failed_stages " in *" $1 "*) ;; *) failed_stages="$failed_stages $1" ;; esac
}
failed_stages=""
start_s=$SECONDS

find_bin() {
	for p in "$bin/$1" "$bin/app/$1" "$bin/gpu/$1" "$bin/tests/gpu/$1" "$bin/bench/$1"; do
		[ -e "$p" ] && { echo "$p"; return; }
	done
	echo "$bin/$1"
}

# Seconds left to stage $1 (at least 0).
stage_left() {
	local end=$((BUDGET_S * SHARE_END[$1] / 100))
	local left=$((end - (SECONDS - start_s)))
	[ $left -gt 0 ] && echo $left || echo 0
}

# run STAGE CAP_S LOGFILE CMD...: CMD under timeout min(CAP_S, what the stage has left), output to
# LOGFILE. Returns CMD's status; 124 when it timed out; 125 when no time was left to start it.
run() {
	local stage=$1 cap=$2 out=$3 left
	shift 3
	left=$(stage_left "$stage")
	[ "$left" -lt "$cap" ] && cap=$left
	if [ "$cap" -lt 3 ]; then
		echo "skipped: stage $stage is out of time" > "$out"
		return 125
	fi
	timeout --kill-after=5 "$cap" "$@" > "$out" 2>&1
}

# Why a step failed, in one line: a timeout, a skip for want of time, or the log's reason. A program's
# own error line ("bwrun: ...") can come before its buffered stdout in the log, so it is looked for
# first: a "no CUDA device present" line, then the last "name: ..." line, then the last line.
why() {
	local line
	case $1 in
	124|137) echo "timed out"; return ;;
	125) echo "no time left in the stage"; return ;;
	esac
	line=$(grep -m 1 "no CUDA device present" "$2" 2>/dev/null)
	[ -n "$line" ] || line=$(grep -E '^[A-Za-z0-9_.-]+: ' "$2" 2>/dev/null | tail -n 1)
	[ -n "$line" ] || line=$(tail -n 1 "$2" 2>/dev/null)
	echo "exit $1: $line"
}

# kv FILE KEY SELECTOR...: KEY's value on the last line of FILE holding every SELECTOR word (k=v);
# "na" when there is none.
kv() {
	local file=$1 key=$2
	shift 2
	[ -f "$file" ] || { echo na; return; }
	awk -v key="$key" -v sels="$*" '
		BEGIN { n = split(sels, want, " ") }
		{
			ok = 1
			for (i = 1; i <= n; i++) {
				found = 0
				for (j = 1; j <= NF; j++) if ($j == want[i]) found = 1
				if (!found) ok = 0
			}
			if (!ok) next
			for (j = 1; j <= NF; j++) if (index($j, key "=") == 1) v = substr($j, length(key) + 2)
		}
		END { print (v == "" ? "na" : v) }' "$file"
}

# ratio A B: A / B to 4 significant digits, or na.
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "na" || b == "na" || a == "" || b == "" || b + 0 == 0) print "na"; else printf "%.4g\n", a / b }'
}

# Our binaries' libraries: the bundle's lib/ (no libstdc++ nor libgcc_s there: the host's serve
# everyone) and pip's nvidia/*/lib (cuBLASLt, cuDNN). Only our binaries get them (through bwenv):
# python3 keeps the environment it came with, its own nvidia libraries included.
bw_ld="${LD_LIBRARY_PATH:-}"
[ -d "$bin/lib" ] && bw_ld="$bin/lib${bw_ld:+:$bw_ld}"
pip_libs=$(python3 -c 'import os, nvidia; print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p) if os.path.isdir(os.path.join(p, d, "lib"))))' 2>/dev/null)
[ -n "$pip_libs" ] && bw_ld="${bw_ld:+$bw_ld:}$pip_libs"
bwenv=(env "LD_LIBRARY_PATH=$bw_ld" BW_CUDNN_LOG=1)
export OPENBLAS_NUM_THREADS=1

module="${CHECK_GPU_MODULE:-$(find_bin libbwgpu.so)}"
bwrun=$(find_bin bwrun)
gpu_launch=$(find_bin gpu_launch)
launch_cost=$(find_bin launch_cost)
gpu_gather=$(find_bin gpu_gather)
# 64 MiB: a few milliseconds per launch at the target (>= 20 GB/s), so the kernels' fixed costs vanish
gather_args=(--mib 64 --iters 20)
info_args=(--module "$module")
cuda_test_arg="$module"
# gpu_launch's iterations: the MLP's batches take microseconds on a GPU; ResNet-50's take milliseconds
# (and far more where cuDNN is missing and CONV runs per item), so few iterations there keep batch 32
# inside the budget
mlp_iters=(--iters 1000 --warmup 100 --graph-iters 200 --syscall-batches 100)
rn16_iters=(--iters 100 --warmup 10 --graph-iters 50 --syscall-batches 20)
rn32_iters=(--iters 50 --warmup 5 --graph-iters 20 --syscall-batches 0)
bwrun_iters=(--warmup 5 --repeat 50)
rn_batches="1 8 32"
rn_bwrun_iters=(--warmup 2 --repeat 10)
if [ "$module" = fake ]; then
	# the fake device runs the model on this CPU, one item after another: a few of each, to try the script
	info_args=(--fake)
	cuda_test_arg=--fake
	mlp_iters=(--iters 10 --warmup 1 --graph-iters 2 --syscall-batches 3)
	rn16_iters=(--iters 2 --warmup 1 --graph-iters 1 --syscall-batches 1)
	rn32_iters=(--iters 2 --warmup 1 --graph-iters 1 --syscall-batches 0)
	bwrun_iters=(--warmup 0 --repeat 1)
	gather_args=(--mib 2 --iters 2)
	rn_batches="1"
	rn_bwrun_iters=(--warmup 0 --repeat 1)
fi
# a bwrun without --precision (an older build) runs FP32 without the flag and no FP16
if "${bwenv[@]}" "$bwrun" --help 2>/dev/null | grep -q -- '--precision'; then
	has_precision=1
else
	has_precision=0
fi

say "== check.sh $(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget ${BUDGET_S} s, module $module, bin $bin"
say "host: $(uname -r), $(nproc) CPUs; python3 $(python3 -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)"
[ $has_precision -eq 1 ] || say "note: this bwrun has no --precision: FP32 runs without it, FP16 runs are skipped"

# The models, written while stage 1 runs: the MLP and the encoder (gen_models.py), and torchvision's
# ResNet-50 with onnxruntime's references (a minute of CPU, four threads: stage 1 is timing meanwhile).
mkdir -p "$res/models"
timeout 120 python3 models/gen_models.py --out "$res/models" mlp minilm > "$res/logs/gen_models.txt" 2>&1 &
gen_pid=$!
rn="${CHECK_RESNET_DIR:-$res/resnet50}"
resnet_pid=""
if [ -z "${CHECK_RESNET_DIR:-}" ]; then
	mkdir -p "$rn"
	timeout 240 python3 tests/gpu/resnet50_onnx.py --out "$rn" --batches "${rn_batches// /,}" \
		> "$res/logs/resnet50_onnx.txt" 2>&1 &
	resnet_pid=$!
else
	echo "reusing $rn (CHECK_RESNET_DIR)" > "$res/logs/resnet50_onnx.txt"
fi

# ---- 1. smoke ----------------------------------------------------------------------------------------
say "== 1. smoke: bwgpu-info, test_gpu_cuda, launch_cost, gpu_launch on the MLP"
run 1 20 "$res/logs/bwgpu-info.txt" "${bwenv[@]}" "$(find_bin bwgpu-info)" "${info_args[@]}"
rc=$?
tee -a "$log" < "$res/logs/bwgpu-info.txt"
[ $rc -eq 0 ] || note_fail 1 "bwgpu-info: $(why $rc "$res/logs/bwgpu-info.txt") (2: no device, 3: no module)"

run 1 90 "$res/logs/test_gpu_cuda.txt" "${bwenv[@]}" "$(find_bin test_gpu_cuda)" "$cuda_test_arg"
rc=$?
grep -E "^SKIP|Run Summary|asserts|tests |Test:.*FAILED" "$res/logs/test_gpu_cuda.txt" | tee -a "$log"
[ $rc -eq 0 ] || note_fail 1 "test_gpu_cuda: $(why $rc "$res/logs/test_gpu_cuda.txt") (77: no device)"

run 1 60 "$res/logs/launch_cost.txt" "${bwenv[@]}" "$launch_cost"
rc=$?
tee -a "$log" < "$res/logs/launch_cost.txt"
[ $rc -eq 0 ] || note_fail 1 "launch_cost: $(why $rc "$res/logs/launch_cost.txt") (77: no device)"
launch_kernel_us=$(kv "$res/logs/launch_cost.txt" launch_kernel_us)
# cudaGraphLaunch from 8 threads at once (each its own stream and graph, as polling lcores) ÷ from one
graph_launch_threads_ratio=$(kv "$res/logs/launch_cost.txt" graph_launch_threads_ratio)

run 1 30 "$res/logs/gpu_gather.txt" "${bwenv[@]}" "$gpu_gather" --module "$module" "${gather_args[@]}"
rc=$?
tee -a "$log" < "$res/logs/gpu_gather.txt"
[ $rc -eq 0 ] || note_fail 1 "gpu_gather: $(why $rc "$res/logs/gpu_gather.txt") (77: no device)"
gather_gbps=$(kv "$res/logs/gpu_gather.txt" gather_gbps)

wait $gen_pid
rc=$?
[ $rc -eq 0 ] || note_fail 1 "gen_models.py: $(why $rc "$res/logs/gen_models.txt")"
mlp_bench="$res/gpu_launch_mlp.txt"
if [ -f "$res/models/mlp.onnx" ]; then
	run 1 90 "$res/logs/gpu_launch_mlp.log" "${bwenv[@]}" "$gpu_launch" --gpu-module "$module" --precision fp32 \
		--launch-mode graph,doorbell --batch 1,8,32 "${mlp_iters[@]}" --output "$mlp_bench" "$res/models/mlp.onnx"
	rc=$?
	[ -f "$mlp_bench" ] && tee -a "$log" < "$mlp_bench"
	# exit 1 with a summary line: some mode was refused (the doorbell, until it is built): recorded
	[ $rc -eq 0 ] || note_fail 1 "gpu_launch mlp: $(why $rc "$res/logs/gpu_launch_mlp.log")"
fi

# ---- 2. correctness: MLP and encoder, FP32 and FP16, GPU against CPU ------------------------------------
say "== 2. MLP and MiniLM encoder, FP32 and FP16: bwrun on the GPU against the CPU (tolerances fp32 $TOL_FP32, fp16 $TOL_FP16)"
for model in mlp minilm; do
	[ -f "$res/models/$model.onnx" ] || { note_fail 2 "$model.onnx was not generated"; continue; }
	batches="1 8"
	[ $model = mlp ] && batches="1 8 32"
	for batch in $batches; do
		d="$res/$model-b$batch"
		mkdir -p "$d/cpu"
		run 2 60 "$d/cpu.txt" "${bwenv[@]}" "$bwrun" --batch "$batch" --seed 1 --output-dir "$d/cpu" "$res/models/$model.onnx"
		rc=$?
		[ $rc -eq 0 ] || { note_fail 2 "$model b$batch CPU: $(why $rc "$d/cpu.txt")"; continue; }
		for prec in fp32 fp16; do
			tol=$TOL_FP32
			[ $prec = fp16 ] && tol=$TOL_FP16
			prec_args=(--precision "$prec")
			if [ $has_precision -eq 0 ]; then
				[ $prec = fp16 ] && { note_fail 2 "$model b$batch fp16: bwrun has no --precision"; continue; }
				prec_args=()
			fi
			mkdir -p "$d/gpu-$prec"
			run 2 60 "$d/gpu-$prec.txt" "${bwenv[@]}" "$bwrun" --device gpu --gpu-module "$module" "${prec_args[@]}" \
				--batch "$batch" --seed 1 "${bwrun_iters[@]}" --output-dir "$d/gpu-$prec" "$res/models/$model.onnx"
			rc=$?
			[ $rc -eq 0 ] || { note_fail 2 "$model b$batch GPU $prec: $(why $rc "$d/gpu-$prec.txt")"; continue; }
			grep "^device" "$d/gpu-$prec.txt" | head -n 1 | tee -a "$log"
			say "$(tail -n 1 "$d/gpu-$prec.txt") precision=$prec"
			run 2 30 "$d/compare-$prec.txt" python3 tests/gpu/compare_outputs.py --tol "$tol" \
				--label "$model b$batch $prec" "$d/cpu" "$d/gpu-$prec"
			rc=$?
			tee -a "$log" < "$d/compare-$prec.txt"
			[ $rc -eq 0 ] || note_fail 2 "$model b$batch $prec: $(why $rc "$d/compare-$prec.txt")"
		done
	done
done

# ---- 3. ResNet-50: gpu_launch FP16 (and FP32), bwrun against onnxruntime --------------------------------
say "== 3. ResNet-50 (torchvision, seeded): gpu_launch, bwrun FP16 ($TOL_FP16) and FP32 ($TOL_RESNET_FP32) against onnxruntime"
rc=0
if [ -n "$resnet_pid" ]; then
	wait "$resnet_pid"
	rc=$?
fi
tail -n 4 "$res/logs/resnet50_onnx.txt" | tee -a "$log"
rn_bench16="$res/gpu_launch_resnet50_fp16.txt"
rn_bench32="$res/gpu_launch_resnet50_fp32.txt"
if [ $rc -ne 0 ] || [ ! -f "$rn/resnet50.onnx" ]; then
	note_fail 3 "resnet50_onnx.py: $(why $rc "$res/logs/resnet50_onnx.txt")"
else
	run 3 100 "$res/logs/gpu_launch_resnet50_fp16.log" "${bwenv[@]}" "$gpu_launch" --gpu-module "$module" --precision fp16 \
		--launch-mode graph,doorbell --batch "${rn_batches// /,}" "${rn16_iters[@]}" --output "$rn_bench16" "$rn/resnet50.onnx"
	rc=$?
	[ -f "$rn_bench16" ] && tee -a "$log" < "$rn_bench16"
	[ $rc -eq 0 ] || note_fail 3 "gpu_launch resnet50 fp16: $(why $rc "$res/logs/gpu_launch_resnet50_fp16.log")"
	# cuDNN's own account (BW_CUDNN_LOG=1): which library, how many CONV ops it planned, and the
	# reason for the first it left out, or why it did not load (CONV then runs on the per-item kernel,
	# far slower: that explains a timeout here)
	cudnn_lines=$(grep -E '^cudnn: .*(CONV ops planned|version)' "$res/logs/gpu_launch_resnet50_fp16.log" | sort -u)
	if [ -n "$cudnn_lines" ]; then
		echo "$cudnn_lines" | sed 's/^/resnet50 fp16 /' | tee -a "$log"
	else
		say "resnet50 fp16: no cuDNN line in the log (BW_CUDNN_LOG=1 was set): cuDNN was never asked"
	fi
	# the layout fp16 chooses by rule (NHWC) against the other, at batch 1: is NHWC the faster there?
	rn_bench16n="$res/gpu_launch_resnet50_fp16_nchw.txt"
	run 3 30 "$res/logs/gpu_launch_resnet50_fp16_nchw.log" "${bwenv[@]}" "$gpu_launch" --gpu-module "$module" \
		--precision fp16 --layout nchw --launch-mode graph --batch 1 "${rn32_iters[@]}" --output "$rn_bench16n" \
		"$rn/resnet50.onnx"
	rc=$?
	[ -f "$rn_bench16n" ] && tee -a "$log" < "$rn_bench16n"
	[ $rc -eq 0 ] || note_fail 3 "gpu_launch resnet50 fp16 nchw: $(why $rc "$res/logs/gpu_launch_resnet50_fp16_nchw.log")"
	run 3 60 "$res/logs/gpu_launch_resnet50_fp32.log" "${bwenv[@]}" "$gpu_launch" --gpu-module "$module" --precision fp32 \
		--launch-mode graph --batch "${rn_batches// /,}" "${rn32_iters[@]}" --output "$rn_bench32" "$rn/resnet50.onnx"
	rc=$?
	[ -f "$rn_bench32" ] && tee -a "$log" < "$rn_bench32"
	[ $rc -eq 0 ] || note_fail 3 "gpu_launch resnet50 fp32: $(why $rc "$res/logs/gpu_launch_resnet50_fp32.log")"
	for prec in fp16 fp32; do
		tol=$TOL_FP16
		[ $prec = fp32 ] && tol=$TOL_RESNET_FP32
		prec_args=(--precision "$prec")
		if [ $has_precision -eq 0 ]; then
			[ $prec = fp16 ] && { note_fail 3 "resnet50 fp16: bwrun has no --precision"; continue; }
			prec_args=()
		fi
		for batch in $rn_batches; do
			d="$res/resnet50-b$batch-$prec"
			mkdir -p "$d"
			run 3 90 "$d.txt" "${bwenv[@]}" "$bwrun" --device gpu --gpu-module "$module" "${prec_args[@]}" --batch "$batch" \
				--input "input=$rn/input_b$batch.npy" "${rn_bwrun_iters[@]}" --output-dir "$d" "$rn/resnet50.onnx"
			rc=$?
			[ $rc -eq 0 ] || { note_fail 3 "resnet50 b$batch $prec bwrun: $(why $rc "$d.txt")"; continue; }
			say "$(tail -n 1 "$d.txt") precision=$prec"
			run 3 30 "$d-compare.txt" python3 tests/gpu/compare_outputs.py --tol "$tol" \
				--label "resnet50 b$batch $prec against onnxruntime" "$rn/ref_b$batch.npy" "$d/logits.npy"
			rc=$?
			tee -a "$log" < "$d-compare.txt"
			[ $rc -eq 0 ] || note_fail 3 "resnet50 b$batch $prec: $(why $rc "$d-compare.txt")"
		done
	done
fi

# ---- 4. the peer: PyTorch FP16, CUDA graph replay ------------------------------------------------------
say "== 4. the peer: PyTorch ResNet-50 FP16, channels_last, cudnn.benchmark, CUDA graph replay"
peer="$res/torch_peer.txt"
run 4 120 "$peer" python3 tests/gpu/torch_peer.py --batches 1,8,32 --replays 200 --e2e 200
rc=$?
tee -a "$log" < "$peer"
[ $rc -eq 0 ] || note_fail 4 "torch_peer.py: $(why $rc "$peer") (2: torch missing, 77: no device)"

# ---- the last line -------------------------------------------------------------------------------------
graph_ms=$(kv "$rn_bench16" graph_ms model=resnet50 precision=fp16 mode=graph batch=1)
e2e_vs=$(kv "$rn_bench16" e2e_vs_graph model=resnet50 precision=fp16 mode=graph batch=1)
torch_ms=$(kv "$peer" replay_ms peer=torch batch=1)
# our launch CPU time: ResNet-50 FP16 at batch 1, else the MLP's (a launch is one graph launch either way)
launch_us=$(kv "$rn_bench16" launch_cpu_us model=resnet50 precision=fp16 mode=graph batch=1)
launch_from="resnet50 fp16 b1"
if [ "$launch_us" = na ]; then
	launch_us=$(kv "$mlp_bench" launch_cpu_us model=mlp precision=fp32 mode=graph batch=1)
	launch_from="mlp fp32 b1"
fi
# system calls per batch: the doorbell's when it ran (its point is none), else the graph launch's
sys_mode=doorbell
sys_n=$(kv "$mlp_bench" syscalls_per_batch model=mlp mode=doorbell batch=1)
[ "$sys_n" = na ] && sys_n=$(kv "$rn_bench16" syscalls_per_batch model=resnet50 mode=doorbell batch=1)
if [ "$sys_n" = na ]; then
	sys_mode=graph
	sys_n=$(kv "$mlp_bench" syscalls_per_batch model=mlp mode=graph batch=1)
	[ "$sys_n" = na ] && sys_n=$(kv "$rn_bench16" syscalls_per_batch model=resnet50 mode=graph batch=1)
fi
say "== summary: launch_cpu_us from $launch_from ($launch_us us), launch_kernel_us $launch_kernel_us," \
	"torch replay b1 $torch_ms ms, system calls from $sys_mode mode; failed stages:${failed_stages:- none};" \
	"$((SECONDS - start_s)) s"
say "resnet50_fp16_b1_ms=$graph_ms e2e_vs_graph=$e2e_vs vs_torch_graph=$(ratio "$graph_ms" "$torch_ms")" \
	"launch_vs_kernel=$(ratio "$launch_us" "$launch_kernel_us") syscalls_per_batch=$sys_n" \
	"gather_gbps=$gather_gbps graph_launch_threads_ratio=$graph_launch_threads_ratio"
[ -z "$failed_stages" ]
