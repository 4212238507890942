#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A peer without a key against the running daemon (MTU 1500, the MLP served), each attack followed
# by a good client's requests that must all be answered:
#  1. SIGHUP 100 ms after start, while the models load: batchwire still comes up and serves, and
#     runs the reload it was asked for once serving (the signal does not kill it);
#  2. one forged PING first segment claiming 12,740 segments with deadline 0xffffffff, smaller claims
#     beside it (PING and INFER): the MLP's 3-datagram requests from the same host, 3 of 3 OK; after
#     reassembly_timeout_ms nothing is held;
#  3. 1024 refused first segments (dead entries) and 1024 malformed ones: the same, 3 of 3 OK;
#  4. 120 one-row INFERs to the echo model, 30 at each of 4 priority levels, whose windows stay
#     open 300 ms, on a server whose polling lcore may hold 64 requests (mbufs_held 64): exactly 64
#     held and answered OK, 56 refused RESOURCE_EXHAUSTED at once and counted (held_refused), a PING
#     sent behind them answered, the NIC's rx_nombuf 0, and the good client served after;
#  5. HTTP (adversary_http.py, in batchwire's namespace): 8 POSTs declaring 128 MiB answered 413 at
#     once with the RSS growing under 256 MiB, a chunked 8 MiB body and a JSON of 100,000 values
#     refused 413; 64 connections sending their headers a byte at a time while the probe listener
#     (--http-probes) answers health and metrics within 1 s; slow bodies holding every inference
#     slot cut off, a good request answered after;
#  6. a model file of a few KB whose planning would take 8 GiB (ConstantOfShape [1, 2^31]): refused
#     at start-up naming memory_budget_mb, before it allocates; then the same file as the MLP's
#     version 2, reloaded: refused the same way, version 1 still answering.
#
# Usage (as root): tests/integration/adversary_netns.sh BATCHWIRE BWCLI MODELS_DIR
set -u
BW_TAG=adv
BW_MTU=1500
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE BWCLI MODELS_DIR}
BWCLI=${2:?usage: $0 BATCHWIRE BWCLI MODELS_DIR}
MODELS=${3:?usage: $0 BATCHWIRE BWCLI MODELS_DIR}
HERE=$(dirname "$0")

[ -f "$MODELS/mlp.onnx" ] || bw_skip "$MODELS/mlp.onnx is missing (the models/ targets need python3 with onnx and numpy)"
bw_env_check
bw_net_up
WORK=$(mktemp -d /tmp/bw-adv.XXXXXX)
trap 'rc=$?; rm -rf "$WORK"; (exit $rc); bw_cleanup' EXIT
mkdir -p "$WORK/repo/mlp/1"
cp "$MODELS/mlp.onnx" "$WORK/repo/mlp/1/model.onnx"

cli() { bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" "$@"; }
stats() { bw_telemetry /batchwire/stats; }
good_client() { # three MLP requests of 3 datagrams each, all answered
	local out
	out=$(cli --timeout-ms 2000 --retries 0 infer --model mlp --count 3 --quiet 2>&1)
	echo "$out" | grep -q "ok=3 errors=0 timeouts=0" || bw_fail "$1: the good client was not served: $(echo "$out" | tail -n 2)"
	echo "  $1: good client $(echo "$out" | grep -o 'sent=[0-9]* ok=[0-9]* errors=[0-9]* timeouts=[0-9]*')"
}
held() { # the reassembly gauges, then whether all are 0
	stats | python3 -c '
import json, sys
s = json.load(sys.stdin)["/batchwire/stats"]
keys = ("reasm_messages", "reasm_segments", "reasm_bytes", "held_messages", "held_mbufs")
print(" ".join(f"{k}={s[k]}" for k in keys), "discards:", {k: v for k, v in s["reasm_discards_by_reason"].items() if v})
sys.exit(0 if all(s[k] == 0 for k in keys) else 1)'
}

echo "== 1. SIGHUP 100 ms after start"
OPENBLAS_NUM_THREADS=1 ip netns exec "$BW_SRV_NS" "$BATCHWIRE" --no-huge -m 1024 --no-pci --file-prefix "$BW_PREFIX" -l 0-1 \
	--vdev "net_af_packet0,iface=$BW_SRV_IF,$BW_AF_PACKET_ARGS" -- --ip "$BW_SERVER_IP" --mtu "$BW_MTU" \
	--model mlp="$WORK/repo/mlp" --model-opt mlp.max_batch_size=8 --model-opt mlp.allowed_batch_sizes=1,2,4,8 \
	--model-opt mlp.memory_budget_mb=1024 --mbufs-held 64 --model-opt echo.max_batch_size=32 --model-opt echo.batch_timeout_micros=300000 \
	--model-opt echo.priority_levels=4 --http 127.0.0.1:8000 --http-probes 127.0.0.1:8002 \
	>"$BW_LOG" 2>&1 &
BW_DAEMON_PID=$!
sleep 0.1
kill -HUP "$BW_DAEMON_PID" 2>/dev/null || bw_fail "batchwire was gone 100 ms after start"
bw_wait_serving "$BW_DAEMON_PID" "$BW_LOG" batchwire
for _ in $(seq 1 100); do # the reload it was asked for runs, once serving
	grep -q "reloading version" "$BW_LOG" && break
	sleep 0.1
done
serving_line=$(grep -n -m1 "serving on" "$BW_LOG" | cut -d: -f1)
reload_line=$(grep -n -m1 "reloading version" "$BW_LOG" | cut -d: -f1)
[ -n "$reload_line" ] && [ "$reload_line" -gt "$serving_line" ] ||
	bw_fail "the early SIGHUP's reload did not run once serving: $(tail -n 5 "$BW_LOG")"
echo "  the reload ran after start-up: $(sed -n "${reload_line}p" "$BW_LOG" | sed 's/^batchwire: //')"
good_client "after an early SIGHUP"

echo "== 2. one PING first segment claiming 12,740 segments for 71 minutes, and smaller claims"
bw_cli python3 "$HERE/adversary.py" claim --server "$BW_SERVER_IP" --segments 12740 --model-ids 0,1,2 ||
	bw_fail "the attack did not run"
good_client "beside the claims"
sleep 0.3 # past reassembly_timeout_ms (100 ms)
held || bw_fail "reassembly still holds something after its clock"

echo "== 3. 1024 refused first segments (dead entries) and 1024 malformed ones"
bw_cli python3 "$HERE/adversary.py" dead --server "$BW_SERVER_IP" --count 1024 || bw_fail "the attack did not run"
good_client "after a table of dead entries"
sleep 0.3
held || bw_fail "reassembly still holds something after its clock"

echo "== 4. 120 one-row INFERs held in open windows (4 levels x 30), 64 held at most"
out=$(bw_cli python3 "$HERE/adversary.py" flood --server "$BW_SERVER_IP" --count 30 --priorities 4) ||
	bw_fail "the PING behind the flood was not answered: $out"
echo "$out"
echo "$out" | grep -q "{'OK': 64, 'RESOURCE_EXHAUSTED': 56}" || bw_fail "not exactly 64 held and 56 refused: $out"
stats | python3 -c '
import json, sys
s = json.load(sys.stdin)["/batchwire/stats"]
print("  " + " ".join(f"{k}={s[k]}" for k in ("held_refused", "held_requests", "port_rx_nombuf")))
sys.exit(0 if s["held_refused"] == 56 and s["held_requests"] == 0 and s["port_rx_nombuf"] == 0 else 1)' ||
	bw_fail "held_refused is not 56, something is still held, or the RX ring found no mbuf"
good_client "after the flood"

echo "== 5. HTTP: large and slow clients"
for attack in large slow bodies; do
	ip netns exec "$BW_SRV_NS" python3 "$HERE/adversary_http.py" "$attack" --pid "$BW_DAEMON_PID" ||
		bw_fail "HTTP: the $attack attack was not held off"
done

echo "== 6. a model whose planning would take 8 GiB, at start-up and as a reload"
python3 - "$MODELS/mlp.onnx" "$WORK/bomb.onnx" <<'PY' || bw_fail "cannot write the model"
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper
mlp = onnx.load(sys.argv[1])
nodes = [helper.make_node("MatMul", ["input", "W"], ["product"]),
         helper.make_node("ConstantOfShape", ["big_shape"], ["big"],
                          value=numpy_helper.from_array(np.array([1.0], np.float32))),
         helper.make_node("ReduceSum", ["big"], ["total"], keepdims=1),
         helper.make_node("Add", ["product", "total"], ["logits"])]
graph = helper.make_graph(nodes, "bomb", [mlp.graph.input[0]], [mlp.graph.output[0]],
                          [numpy_helper.from_array(np.zeros((784, 10), np.float32), "W"),
                           numpy_helper.from_array(np.array([1, 1 << 31], np.int64), "big_shape")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.save(model, sys.argv[2])
PY
out=$(OPENBLAS_NUM_THREADS=1 timeout 60 "$BATCHWIRE" -l 0 --no-huge -m 512 --no-pci --file-prefix "$BW_PREFIX-bomb" \
	--vdev net_null0 -- --ip 10.99.0.1 --http off --model bomb="$WORK/bomb.onnx" \
	--model-opt bomb.memory_budget_mb=1024 2>&1)
rc=$?
[ "$rc" -ne 0 ] && echo "$out" | grep -q "memory_budget_mb" ||
	bw_fail "the model was not refused at start-up for its memory (exit $rc): $(echo "$out" | tail -n 2)"
echo "  at start-up (exit $rc): $(echo "$out" | grep -o "node ConstantOfShape.*memory_budget_mb)")"
mkdir -p "$WORK/repo/mlp/2" && cp "$WORK/bomb.onnx" "$WORK/repo/mlp/2/model.onnx"
out=$(bw_telemetry "/batchwire/reload,mlp")
echo "$out" | grep -q "version 1 still serves" && grep -q "reload failed.*memory_budget_mb" "$BW_LOG" ||
	bw_fail "the reload was not refused for its memory, version 1 serving: $out $(grep "reload failed" "$BW_LOG")"
echo "  as a reload: $(grep -o "version 1 still serves; the reload failed.*" "$BW_LOG" | sed 's|/tmp/[^:]*: ||' | head -n 1)"
good_client "after the refused reload"

kill -0 "$BW_DAEMON_PID" 2>/dev/null || bw_fail "batchwire died"
bw_daemon_stop
echo "PASS"
