#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Requests and replies larger than one datagram, end to end at the link MTU in BW_MTU (1500 or 9000):
# batchwire on af_packet (netns.sh) serves ResNet-50 (602,112-byte input: 421 datagrams at MTU 1500,
# 68 at 9000), the MLP (3 datagrams at 1500), the transformer, the MLP again on the fake GPU, and echo;
# bwcli sends from the client namespace and checks every reply against bwrun's output for the same
# input (--expect, 1e-4 relative):
#   - 4 clients at once, 25 ResNet-50 requests each (4 distinct images), batched together;
#   - 200 MLP requests, 50 on the fake GPU (the gather reads rows that cross packet buffers), 20
#     transformer requests, 10 echoes of 600 KB (a segmented reply in the request's own datagrams);
#   - 5% of the client's datagrams withheld (bwcli --drop-permille 50: these hosts have no netem):
#     every request ends OK after resends or as a timeout, the client's counts add up, and on the
#     server every incomplete message was discarded by its clock and counted;
# then nothing is held (reassembly and held gauges 0, every mbuf back in the pool), every accepted
# request was answered, and SIGTERM stops it with exit 0.
#
# Usage (as root): BW_MTU=1500|9000 segments_netns.sh BATCHWIRE BWCLI BWRUN MODELS_DIR
set -u
BW_TAG=seg${BW_MTU:-9000}
. "$(dirname "$0")/netns.sh"
BATCHWIRE=$1
BWCLI=$2
BWRUN=$3
MODELS=$4
R50_PER_CLIENT=${R50_PER_CLIENT:-25}

for m in mlp minilm resnet50; do
	[ -f "$MODELS/$m.onnx" ] || bw_skip "$MODELS/$m.onnx is missing (the models/ targets need python3 with onnx and numpy)"
done
python3 -c 'import numpy' 2>/dev/null || bw_skip "python3 cannot import numpy"
bw_env_check
bw_net_up

WORK=$(mktemp -d /tmp/bw-segments.XXXXXX)
trap 'bw_cleanup; rm -rf "$WORK"' EXIT
cli() { bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" "$@"; }
stats() { bw_telemetry /batchwire/stats; }
model_stats() {
	echo "/batchwire/model,$1" | dpdk-telemetry.py -f "$BW_PREFIX" 2>/dev/null | grep -F '"/batchwire/model"' | tail -n 1
}
# one_ok LOG COUNT: the summary of a bwcli run that had to answer every request
one_ok() {
	grep -q "ok=$2 errors=0 timeouts=0" "$1" || bw_fail "$(basename "$1" .log): expected ok=$2: $(tail -n 3 "$1")"
	echo "  $(basename "$1" .log): $(tail -n 2 "$1" | tr '\n' ' ')"
}

echo "== references: bwrun on the same inputs"
python3 - "$WORK" <<'PY' || bw_fail "cannot write the inputs"
import sys, numpy as np
work = sys.argv[1]
rng = np.random.default_rng(20261202)
images = rng.uniform(-1, 1, (4, 3, 224, 224)).astype(np.float32)
np.save(f"{work}/r50_all.npy", images)
for i in range(4):
    np.save(f"{work}/r50_{i}.npy", images[i:i + 1])
np.save(f"{work}/mlp.npy", rng.uniform(-1, 1, (1, 784)).astype(np.float32))
np.save(f"{work}/ids.npy", rng.integers(0, 30522, (1, 128), dtype=np.int64))
mask = np.ones((1, 128), dtype=np.int64)
mask[0, 100:] = 0
np.save(f"{work}/mask.npy", mask)
PY
export OPENBLAS_NUM_THREADS=1
"$BWRUN" --batch 4 --input image="$WORK/r50_all.npy" --output-dir "$WORK/ref_r50" "$MODELS/resnet50.onnx" \
	>"$WORK/bwrun_r50.log" 2>&1 || bw_fail "bwrun resnet50: $(tail -n 3 "$WORK/bwrun_r50.log")"
"$BWRUN" --input input="$WORK/mlp.npy" --output-dir "$WORK/ref_mlp" "$MODELS/mlp.onnx" >"$WORK/bwrun_mlp.log" 2>&1 ||
	bw_fail "bwrun mlp: $(tail -n 3 "$WORK/bwrun_mlp.log")"
"$BWRUN" --input input_ids="$WORK/ids.npy" --input attention_mask="$WORK/mask.npy" --output-dir "$WORK/ref_minilm" \
	"$MODELS/minilm.onnx" >"$WORK/bwrun_minilm.log" 2>&1 || bw_fail "bwrun minilm: $(tail -n 3 "$WORK/bwrun_minilm.log")"
python3 - "$WORK" <<'PY' || bw_fail "cannot split the ResNet-50 references"
import os, sys, numpy as np
work = sys.argv[1]
ref = np.load(f"{work}/ref_r50/logits.npy")
for i in range(4):
    os.makedirs(f"{work}/ref_r50_{i}", exist_ok=True)
    np.save(f"{work}/ref_r50_{i}/logits.npy", ref[i:i + 1])
PY

echo "== batchwire at MTU $BW_MTU: ResNet-50, MLP (CPU and fake GPU), transformer, echo"
bw_daemon_start "$BATCHWIRE" --gpu-module fake \
	--model r50="$MODELS/resnet50.onnx" --model-opt r50.max_batch_size=4 --model-opt r50.allowed_batch_sizes=1,2,4 \
	--model-opt r50.batch_timeout_micros=2000 \
	--model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8 --model-opt mlp.allowed_batch_sizes=1,2,4,8 \
	--model mlpg="$MODELS/mlp.onnx" --model-opt mlpg.device=gpu --model-opt mlpg.max_batch_size=4 \
	--model-opt mlpg.allowed_batch_sizes=1,2,4 \
	--model minilm="$MODELS/minilm.onnx" --model-opt minilm.max_batch_size=2 --model-opt minilm.allowed_batch_sizes=1,2
stats >"$WORK/stats_start.json"

echo "== 4 clients at once, $R50_PER_CLIENT ResNet-50 requests each"
for c in 0 1 2 3; do
	cli --timeout-ms 20000 infer --model r50 --tensor image="$WORK/r50_$c.npy" --count "$R50_PER_CLIENT" \
		--expect "$WORK/ref_r50_$c" --quiet >"$WORK/r50_client_$c.log" 2>&1 &
done
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")
for c in 0 1 2 3; do one_ok "$WORK/r50_client_$c.log" "$R50_PER_CLIENT"; done

echo "== MLP, MLP on the fake GPU, transformer, echo of 600 KB"
cli infer --model mlp --tensor input="$WORK/mlp.npy" --count 200 --expect "$WORK/ref_mlp" --quiet >"$WORK/mlp.log" 2>&1
one_ok "$WORK/mlp.log" 200
cli infer --model mlpg --tensor input="$WORK/mlp.npy" --count 50 --expect "$WORK/ref_mlp" --quiet >"$WORK/mlpg.log" 2>&1
one_ok "$WORK/mlpg.log" 50
cli --timeout-ms 5000 infer --model minilm --tensor input_ids="$WORK/ids.npy" --tensor attention_mask="$WORK/mask.npy" \
	--count 20 --expect "$WORK/ref_minilm" --quiet >"$WORK/minilm.log" 2>&1
one_ok "$WORK/minilm.log" 20
cli infer --model echo --shape 1,150528 --count 10 --expect-echo --quiet >"$WORK/echo.log" 2>&1
one_ok "$WORK/echo.log" 10

echo "== 5% of the client's datagrams withheld"
for c in 0 1 2 3; do
	cli --drop-permille 50 --timeout-ms 300 --retries 10 infer --model mlp --tensor input="$WORK/mlp.npy" --count 50 \
		--expect "$WORK/ref_mlp" --quiet >"$WORK/loss_mlp_$c.log" 2>&1 &
done
cli --drop-permille 50 --timeout-ms 3000 --retries 1 infer --model r50 --tensor image="$WORK/r50_0.npy" --count 3 \
	--expect "$WORK/ref_r50_0" --quiet >"$WORK/loss_r50.log" 2>&1 &
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")
sleep 0.5 # longer than the reassembly clock (100 ms): every incomplete message has expired
stats >"$WORK/stats_end.json"
for m in r50 mlp mlpg minilm; do model_stats "$m" >"$WORK/model_$m.json"; done
python3 - "$WORK" <<'PY' || bw_fail "the loss phase did not conserve every request"
import glob, json, re, sys
work = sys.argv[1]
ok = True
def check(what, good):
    global ok
    print(f"  {what}: {'ok' if good else 'WRONG'}")
    ok &= bool(good)
total_timeouts = 0
for log in sorted(glob.glob(f"{work}/loss_*.log")):
    text = open(log).read()
    m = re.search(r"sent=(\d+) ok=(\d+) errors=(\d+) timeouts=(\d+)", text)
    if not m:
        check(f"{log}: summary line", False)
        continue
    sent, good, errors, timeouts = map(int, m.groups())
    total_timeouts += timeouts
    check(f"{log.split('/')[-1]}: sent {sent} = ok {good} + errors {errors} + timeouts {timeouts}",
          sent == good + errors + timeouts and errors == 0)
    if "mlp" in log:
        check(f"{log.split('/')[-1]}: most MLP requests answered after resends ({good} of {sent})", good >= sent * 0.9)
start = json.load(open(f"{work}/stats_start.json"))["/batchwire/stats"]
end = json.load(open(f"{work}/stats_end.json"))["/batchwire/stats"]
for key in ("reasm_messages", "reasm_segments", "reasm_bytes", "held_messages", "held_mbufs"):
    check(f"{key} back to 0 (is {end[key]})", end[key] == 0)
check(f"every mbuf back in the pool ({end['mbufs_free']} of {end['mbufs_total']} free, {start['mbufs_free']} at start)",
      end["mbufs_free"] == start["mbufs_free"])
discards = end["reasm_discards_by_reason"]
print(f"  reassembly discards: { {k: v for k, v in discards.items() if v} }")
check(f"incomplete messages discarded by their clock ({discards['timeout']})", discards["timeout"] > 0)
for m in ("r50", "mlp", "mlpg", "minilm"):
    s = json.load(open(f"{work}/model_{m}.json"))["/batchwire/model"]
    check(f"{m}: accepted {s['requests']} = answered {s['requests_done']}, none in flight",
          s["requests"] == s["requests_done"] and s["inflight"] == 0 and s["failed"] == 0)
check(f"drops: none but discarded segments ({end['drops']} = {end['drops_by_reason']['segment']})",
      end["drops"] == end["drops_by_reason"]["segment"])
sys.exit(0 if ok else 1)
PY

echo "== stopping batchwire (SIGTERM)"
bw_daemon_stop
echo "PASS"
