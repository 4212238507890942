#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# GPU smoke test of issue 6 (steps 1 and 4), for a machine with an NVIDIA GPU (under a minute):
#   tests/gpu/smoke.sh BUILD_DIR
# bwgpu-info must find a device, and the gpu-cuda test must pass (a SKIP here is a failure): it covers
# registration, completion words, and device programs run as CUDA graphs, GEMM through cuBLASLt (found
# by dlopen: set BW_CUBLASLT_LIB or LD_LIBRARY_PATH when it is not on the loader's path).
set -u
build="${1:-build}"
"$build/gpu/bwgpu-info" || { echo "smoke: bwgpu-info found no device (exit $?)"; exit 1; }
"$build/tests/gpu/test_gpu_cuda" "$build/gpu/libbwgpu.so"
rc=$?
[ $rc -eq 0 ] || { echo "smoke: test_gpu_cuda exit $rc (77 = no device)"; exit 1; }
echo "smoke: passed"
