#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The demo: batchwire serving ONNX models (the MLP of models/, 784-1024-1024-10, and ResNet-50 with
# generated weights) on a virtual NIC at an ordinary MTU of 1500. Two network namespaces joined by a
# veth pair (see tests/integration/netns.sh for names and addresses); batchwire polls one end through
# DPDK's af_packet PMD on lcore 1 and runs the models on the main lcore, their CPU worker; bwcli talks
# to it from the other end over ordinary kernel UDP. Requests larger than a datagram (the MLP's 3 KB,
# ResNet-50's 602 KB image: 421 datagrams) travel in segments and are reassembled on the polling
# core. Shows MODEL_INFO, one MLP reply next to bwrun's output for the same input, load from one
# client and from 4 at once (they share batching windows), one ResNet-50 request's top-5 next to
# bwrun's and a short ResNet-50 load, and the telemetry; stops with SIGTERM.
#
# Usage (as root): app/demo.sh [BUILD_DIR] [COUNT]
set -u
BW_TAG=demo
BW_MTU=1500
. "$(dirname "$0")/../tests/integration/netns.sh"
BUILD=${1:-build}
COUNT=${2:-2000}
BATCHWIRE=$BUILD/app/batchwire
BWCLI=$BUILD/client/bwcli
BWRUN=$BUILD/app/bwrun
MLP=$BUILD/models/mlp.onnx
R50=$BUILD/models/resnet50.onnx
[ -x "$BATCHWIRE" ] && [ -x "$BWCLI" ] && [ -x "$BWRUN" ] || bw_fail "build first: $BATCHWIRE, $BWCLI and $BWRUN not found"
[ -f "$MLP" ] || bw_fail "$MLP not found: the build writes it with python3's onnx and numpy (bash .ci/install)"
if [ ! -f "$R50" ]; then
	echo "== writing $R50 (ResNet-50, generated weights, ~100 MB: once)"
	ninja -C "$BUILD" models/resnet50.onnx >/dev/null || bw_fail "cannot build $R50"
fi

bw_env_check
bw_net_up
WORK=$(mktemp -d /tmp/bw-demo.XXXXXX)
trap 'bw_cleanup; rm -rf "$WORK"' EXIT
echo "== batchwire on net_af_packet ($BW_SRV_NS/$BW_SRV_IF, $BW_SERVER_IP:7878, MTU $BW_MTU); client in $BW_CLI_NS ($BW_CLIENT_IP)"
bw_daemon_start "$BATCHWIRE" --model mlp="$MLP" --model-opt mlp.max_batch_size=8 \
	--model-opt mlp.allowed_batch_sizes=1,2,4,8 --model-opt mlp.batch_timeout_micros=200 \
	--model-opt mlp.num_batch_threads=2 \
	--model r50="$R50" --model-opt r50.max_batch_size=4 --model-opt r50.allowed_batch_sizes=1,2,4 \
	--model-opt r50.batch_timeout_micros=2000
grep -E "batchwire: (CPU kernels|model|port|lcore|serving)" "$BW_LOG"

echo "== ping from the client namespace: ICMP, then protocol v1 PING"
bw_cli ping -c 2 -q "$BW_SERVER_IP" | tail -n 2
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" ping --count 3

echo "== model info"
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" info --model mlp

echo "== one request: the daemon's reply next to bwrun's output for the same input"
"$BWRUN" --save-inputs "$WORK" --output-dir "$WORK/bwrun" "$MLP" >"$WORK/bwrun.log" 2>&1 ||
	bw_fail "bwrun failed: $(tail -n 3 "$WORK/bwrun.log")"
mkdir -p "$WORK/reply"
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --tensor input="$WORK/input.npy" \
	--output-dir "$WORK/reply" | tail -n 1
python3 - "$WORK" <<'PY' || bw_fail "the reply differs from bwrun's output"
import sys
import numpy as np
work = sys.argv[1]
ours, ref = np.load(f"{work}/reply/logits.npy"), np.load(f"{work}/bwrun/logits.npy")
np.set_printoptions(precision=4, suppress=True)
print("  daemon logits:", ours[0])
print("  bwrun logits: ", ref[0])
print("  max abs difference %.3g; class %d" % (np.max(np.abs(ours - ref)), int(np.argmax(ours))))
sys.exit(0 if np.allclose(ours, ref, rtol=1e-4, atol=1e-5) else 1)
PY

echo "== $COUNT MLP inferences (generated inputs) from one client"
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --count "$COUNT" --quiet

echo "== 4 clients at once, 1000 requests each: they share batching windows"
for c in 1 2 3 4; do
	bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --count 1000 --quiet | tail -n 1 |
		sed "s/^/  client $c: /" &
done
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")

echo "== ResNet-50: one 602 KB image in $(( (602112 + 56 + BW_MTU - 69) / (BW_MTU - 68) )) datagrams; its top-5 next to bwrun's"
mkdir -p "$WORK/r50/bwrun"
"$BWRUN" --save-inputs "$WORK/r50" --output-dir "$WORK/r50/bwrun" "$R50" >"$WORK/bwrun_r50.log" 2>&1 ||
	bw_fail "bwrun failed: $(tail -n 3 "$WORK/bwrun_r50.log")"
mkdir -p "$WORK/r50/reply"
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" --timeout-ms 5000 infer --model r50 \
	--tensor image="$WORK/r50/image.npy" --output-dir "$WORK/r50/reply" | tail -n 2
python3 - "$WORK/r50" <<'PY' || bw_fail "the ResNet-50 reply differs from bwrun's output"
import sys
import numpy as np
work = sys.argv[1]
ours, ref = np.load(f"{work}/reply/logits.npy")[0], np.load(f"{work}/bwrun/logits.npy")[0]
print("  daemon top-5:", np.argsort(-ours)[:5].tolist(), " bwrun top-5:", np.argsort(-ref)[:5].tolist())
print("  max relative difference %.3g" % np.max(np.abs(ours - ref) / (np.abs(ref) + 1e-3)))
sys.exit(0 if np.allclose(ours, ref, rtol=1e-4, atol=1e-5) else 1)
PY

echo "== 2 clients at once, 10 ResNet-50 requests each (batched together)"
for c in 1 2; do
	bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" --timeout-ms 10000 infer --model r50 \
		--tensor image="$WORK/r50/image.npy" --count 10 --quiet >"$WORK/r50_client_$c.log" 2>&1 &
done
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")
for c in 1 2; do
	echo "  client $c: $(tail -n 2 "$WORK/r50_client_$c.log" | tr '\n' ' ')"
done

echo "== the built-in echo model: 100 requests, every reply checked"
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model echo --count 100 --shape 1,16 --expect-echo --quiet |
	tail -n 1

echo "== telemetry: dpdk-telemetry.py -f $BW_PREFIX, then /batchwire/model,mlp and /batchwire/stats"
print_dict='
import json, sys
reply = json.loads(sys.stdin.read())
for key, value in next(iter(reply.values())).items():
    if isinstance(value, dict):
        nonzero = {k: v for k, v in value.items() if v}
        print("  %-22s %s" % (key, nonzero or "all 0"))
    else:
        print("  %-22s %s" % (key, value))'
echo "/batchwire/model,mlp" | dpdk-telemetry.py -f "$BW_PREFIX" 2>/dev/null | grep -F '"/batchwire/model"' |
	tail -n 1 | python3 -c "$print_dict"
echo "  --"
bw_telemetry /batchwire/stats | python3 -c "$print_dict"

echo "== stopping batchwire (SIGTERM)"
bw_daemon_stop
