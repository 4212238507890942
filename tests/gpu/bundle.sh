#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Packs what tests/gpu/smoke.sh and tests/gpu/check.sh need on a GPU machine that has the CUDA driver
# but neither DPDK nor this project's build dependencies (the H200 machine lent to some sessions:
# nvcc, PyTorch, onnx and pip's nvidia-* libraries, nothing else), into the source tree, so that the
# GPU machine needs only the tree:
#   tests/gpu/bundle.sh BUILD_DIR [BUNDLE_DIR]     (BUNDLE_DIR: gpu-bundle/ in the tree, git-ignored)
# BUNDLE_DIR gets bwrun, bwgpu-info, test_gpu_cuda, libbwgpu.so, gpu_launch, gpu_gather, launch_cost
# (when built: it needs the CUDA module's toolkit) and, in lib/, every shared library they link that
# neither glibc nor the compiler's runtime provides (OpenBLAS, protobuf-c, CUnit, ...). Not
# libstdc++ nor libgcc_s: every host with PyTorch has its own, at least as new as the build
# machine's, and a copy of ours put first on the library path would also be loaded by cuBLASLt and
# cuDNN, whose own needs it may not meet (fatal where the host's glibc is older). Models are not
# packed (MiniLM's weights are ~90 MB): the scripts generate them there with models/gen_models.py and
# tests/gpu/resnet50_onnx.py. The bundle must stay under BUNDLE_MAX_MIB (what one transfer to the
# GPU machine carries): larger, this fails.
set -eu
BUNDLE_MAX_MIB=60
build="${1:-}"
[ -n "$build" ] || { echo "usage: tests/gpu/bundle.sh BUILD_DIR [BUNDLE_DIR]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
out="${2:-$root/gpu-bundle}"
for f in app/bwrun gpu/bwgpu-info tests/gpu/test_gpu_cuda gpu/libbwgpu.so bench/gpu_launch bench/gpu_gather; do
	[ -e "$build/$f" ] || { echo "bundle: $build/$f is missing (build with -Dcuda=enabled)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/lib"
cp "$build/app/bwrun" "$build/gpu/bwgpu-info" "$build/tests/gpu/test_gpu_cuda" "$build/gpu/libbwgpu.so" \
	"$build/bench/gpu_launch" "$build/bench/gpu_gather" "$out/"
bins="$out/bwrun $out/bwgpu-info $out/test_gpu_cuda $out/libbwgpu.so $out/gpu_launch $out/gpu_gather"
if [ -e "$build/tests/gpu/launch_cost" ]; then
	cp "$build/tests/gpu/launch_cost" "$out/"
	bins="$bins $out/launch_cost"
else
	echo "bundle: no $build/tests/gpu/launch_cost (check.sh will report it missing)" >&2
fi
# debug builds carry their symbols: not needed to run, and most of the size
strip --strip-debug $bins 2>/dev/null || true
for bin in $bins; do
	ldd "$bin" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
	case "$(basename "$lib")" in
	libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;; # the host's glibc
	libstdc++.so.*|libgcc_s.so.*) ;; # the host's compiler runtime (above)
	*) cp -L "$lib" "$out/lib/" && strip --strip-unneeded "$out/lib/$(basename "$lib")" 2>/dev/null || true ;;
	esac
done
mib=$(du -sm "$out" | cut -f1)
echo "bundle: $out, $mib MiB ($(ls "$out/lib" | wc -l) libraries in lib/)"
if [ "$mib" -ge "$BUNDLE_MAX_MIB" ]; then
	echo "bundle: $mib MiB is over $BUNDLE_MAX_MIB MiB" >&2
	exit 1
fi
