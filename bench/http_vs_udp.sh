#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A benchmark, not a test: the MLP at batch 1 over protocol v1 (bwcli, 2000 requests one after the
# other) and over HTTP (tritonclient.http from Python, 1000 requests each in binary tensors and in
# JSON, after 50 to warm up), against one batchwire on a veth pair (netns.sh's), batch_timeout_micros
# 0 so that no batching window adds to either. Prints each side's p50 and p99; exits 0 whatever they
# are. The HTTP figures include Python's client, the kernel's TCP and the slot's 20 µs waits.
#
# Usage (as root): bench/http_vs_udp.sh BUILD_DIR   (a release build: meson setup build-rel --buildtype=release)
set -u
BW_TAG=lat
. "$(dirname "$0")/../tests/integration/netns.sh"
B=${1:?usage: $0 BUILD_DIR}
bw_env_check
python3 -c 'import tritonclient.http' 2>/dev/null || bw_skip "tritonclient[http] is not installed"
bw_net_up
bw_daemon_start "$B/app/batchwire" --model mlp="$B/models/mlp.onnx" --model-opt mlp.max_batch_size=8 \
	--model-opt mlp.allowed_batch_sizes=1,2,4,8 --model-opt mlp.batch_timeout_micros=0
echo "udp (bwcli): $(bw_cli "$B/client/bwcli" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --count 2000 \
	--quiet | tail -n 1)"
ip netns exec "$BW_SRV_NS" python3 -c '
import time, numpy as np, tritonclient.http as h
c = h.InferenceServerClient(url="127.0.0.1:8000")
x = np.random.rand(1, 784).astype(np.float32)
for binary in (True, False):
    t = h.InferInput("input", [1, 784], "FP32"); t.set_data_from_numpy(x, binary_data=binary)
    o = [h.InferRequestedOutput("logits", binary_data=binary)]
    for _ in range(50):
        c.infer("mlp", [t], outputs=o)
    lat = []
    for _ in range(1000):
        t0 = time.perf_counter(); c.infer("mlp", [t], outputs=o); lat.append(time.perf_counter() - t0)
    lat.sort()
    print("http %s: p50_us=%.0f p99_us=%.0f" % ("binary" if binary else "json", lat[500] * 1e6, lat[990] * 1e6))'
bw_daemon_stop >/dev/null
