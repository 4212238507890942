#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bwgpu-info starts on any host and says what it found: exit 0 (devices), 2 (no device) or 3 (no
# module), each with a line saying why; never a crash. Then the fake device through the same tool.
info="$1"
out=$("$info" 2>&1)
rc=$?
echo "$out"
case $rc in
0 | 2 | 3) ;;
*) echo "bwgpu-info: unexpected exit status $rc"; exit 1 ;;
esac
[ $rc -eq 0 ] || echo "$out" | grep -qE '^(no CUDA device present|no GPU): ' || {
	echo "bwgpu-info: exit $rc without a reason line"; exit 1; }
"$info" --fake | grep -q '^device 0: batchwire fake GPU 0, compute capability 9.0' || {
	echo "bwgpu-info --fake: no fake device listed"; exit 1; }
echo "exit status $rc: fine"
