#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# One fuzz target's smoke test (tests/fuzz/meson.build; docs/fuzzing.md):
#
#     smoke.sh WORK FUZZER CORPUS [libFuzzer options...]
#
# libFuzzer writes the inputs it finds into its first corpus directory, so that is WORK/new, emptied
# before every run (each run starts from the committed corpus alone); CORPUS, the committed one, comes
# second and is only read. A finding is written to WORK/artifacts/ (kept), not to the source tree.
# OpenBLAS's pthread build starts no threads with OPENBLAS_NUM_THREADS=1 (runtime/kernels/meson.build).
set -eu
work=$1
fuzzer=$2
corpus=$3
shift 3
rm -rf "$work/new"
mkdir -p "$work/new" "$work/artifacts"
exec env OPENBLAS_NUM_THREADS=1 "$fuzzer" "$@" -artifact_prefix="$work/artifacts/" "$work/new" "$corpus"
