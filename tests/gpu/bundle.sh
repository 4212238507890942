#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Packs what tests/gpu/smoke.sh and tests/gpu/check.sh need on a GPU machine that has the CUDA driver
# but neither DPDK nor this project's build dependencies (the H200 machine lent to some sessions:
# nvcc, PyTorch, onnx and pip's nvidia-* libraries, nothing else):
#   tests/gpu/bundle.sh BUILD_DIR BUNDLE_DIR
# BUNDLE_DIR gets bwrun, bwgpu-info, test_gpu_cuda, libbwgpu.so, gpu_launch, launch_cost (when built:
# it needs the CUDA module's toolkit) and, in lib/, every shared library they link that glibc does not
# provide (OpenBLAS, protobuf-c, CUnit, ...). Models are not packed (MiniLM's weights are ~90 MB):
# the scripts generate them there with models/gen_models.py and tests/gpu/resnet50_onnx.py.
set -eu
build="$1"
out="$2"
for f in app/bwrun gpu/bwgpu-info tests/gpu/test_gpu_cuda gpu/libbwgpu.so bench/gpu_launch; do
	[ -e "$build/$f" ] || { echo "bundle: $build/$f is missing (build with -Dcuda=enabled)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/lib"
cp "$build/app/bwrun" "$build/gpu/bwgpu-info" "$build/tests/gpu/test_gpu_cuda" "$build/gpu/libbwgpu.so" \
	"$build/bench/gpu_launch" "$out/"
bins="$out/bwrun $out/bwgpu-info $out/test_gpu_cuda $out/libbwgpu.so $out/gpu_launch"
if [ -e "$build/tests/gpu/launch_cost" ]; then
	cp "$build/tests/gpu/launch_cost" "$out/"
	bins="$bins $out/launch_cost"
else
	echo "bundle: no $build/tests/gpu/launch_cost (check.sh will report it missing)" >&2
fi
for bin in $bins; do
	ldd "$bin" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
	case "$(basename "$lib")" in
	libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;; # the host's glibc
	*) cp -L "$lib" "$out/lib/" ;;
	esac
done
du -sh "$out"
