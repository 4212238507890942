#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A model with device = gpu served end to end by the daemon, on the fake device (gpu/fake.h: the CPU
# behind the GPU interface, so this runs without a GPU): batchwire on af_packet (netns.sh) serves the
# MLP twice, "mlp" on the CPU and "mlpg" on the GPU, from the same file. The GPU path is the real one:
# the mbuf pool registered with the device, the polling lcore's executor launching each closed batch
# (gather from the request mbufs, the program, scatter into them) and polling its completion word.
#   - distinct inputs, one request each to mlpg: every reply within 1e-4 of bwrun's CPU output;
#   - 3 clients at once on mlpg (batches of several requests, padded);
#   - /batchwire/gpu (healthy, regions registered) and /batchwire/model,mlpg balance: every batch
#     launched, completed, none failed or in flight;
#   - mlpg reloaded (telemetry) while 3 clients send: every request answered, a reply after it
#     bwrun's, the launch counters carried over the executors the reload replaced;
#   - SIGTERM stops it with exit 0.
# First, without namespaces: with the CUDA module and no device (these machines), start-up stops with
# exit 1 and one line saying why, before serving anything (BW_EXPECT_GPU=1 on a host with a GPU skips
# that part).
#
# Usage (as root): gpu_netns.sh BATCHWIRE BWCLI BWRUN MODELS_DIR
set -u
BW_TAG=gpu
. "$(dirname "$0")/netns.sh"
BATCHWIRE=$1
BWCLI=$2
BWRUN=$3
MODELS=$4
REQUESTS=${REQUESTS:-24}
CLIENT_REQUESTS=${CLIENT_REQUESTS:-100}
# Each one-request step gets its own limit, so that a hang fails naming its step (and the EXIT trap
# removes the namespaces) rather than running into meson's timeout, whose SIGKILL leaves them behind.
STEP_TIMEOUT=${STEP_TIMEOUT:-30}

[ -f "$MODELS/mlp.onnx" ] || bw_skip "$MODELS/mlp.onnx is missing (the models/ targets need python3 with onnx and numpy)"
python3 -c 'import numpy' 2>/dev/null || bw_skip "python3 cannot import numpy"
bw_env_check

WORK=$(mktemp -d /tmp/bw-gpu.XXXXXX)
trap 'bw_cleanup; rm -rf "$WORK"' EXIT
GPU_OPTS=(--model-opt mlpg.device=gpu --model-opt mlpg.max_batch_size=8 --model-opt mlpg.allowed_batch_sizes=1,2,4,8
	--model-opt mlpg.batch_timeout_micros=300 --model-opt mlpg.num_batch_threads=2)

echo "== no GPU here: the default module refuses at start-up"
if [ -z "${BW_EXPECT_GPU:-}" ]; then
	"$BATCHWIRE" --no-huge -m 256 --no-pci --file-prefix "bw-gpu-refuse-$$" -l 0 --vdev net_null0 -- \
		--ip 10.77.0.1 --model mlpg="$MODELS/mlp.onnx" "${GPU_OPTS[@]}" >"$WORK/refuse.log" 2>&1
	rc=$?
	rm -rf "/var/run/dpdk/bw-gpu-refuse-$$"
	line=$(grep "model 'mlpg' has device = gpu, but the GPU cannot be used" "$WORK/refuse.log")
	[ "$rc" -eq 1 ] && [ -n "$line" ] || bw_fail "expected exit 1 and the reason, got $rc: $(tail -n 3 "$WORK/refuse.log")"
	echo "  exit $rc: $line"
	grep -q "serving on" "$WORK/refuse.log" && bw_fail "it served before refusing"
fi

bw_net_up
bw_daemon_start "$BATCHWIRE" --gpu-module fake \
	--model mlp="$MODELS/mlp.onnx" --model mlpg="$MODELS/mlp.onnx" "${GPU_OPTS[@]}"
grep -E "batchwire: (model '|GPU )" "$BW_LOG" | sed 's/^/  /'

python3 - "$WORK" "$REQUESTS" <<'PY' || bw_fail "cannot write the inputs"
import sys, numpy as np
work, n = sys.argv[1], int(sys.argv[2])
rows = np.random.default_rng(20261129).uniform(-1, 1, (n, 784)).astype(np.float32)
np.save(f"{work}/all.npy", rows)
for i, row in enumerate(rows):
    np.save(f"{work}/in_{i}.npy", row[None])
PY

echo "== $REQUESTS distinct inputs to mlpg, one request each, compared with bwrun on the CPU"
for i in $(seq 0 $((REQUESTS - 1))); do
	mkdir -p "$WORK/reply_$i"
	timeout -k 5 "$STEP_TIMEOUT" ip netns exec "$BW_CLI_NS" "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" \
		infer --model mlpg --tensor "input=$WORK/in_$i.npy" --quiet --output-dir "$WORK/reply_$i" \
		>"$WORK/cli_$i.log" 2>&1
	rc=$?
	[ "$rc" -eq 124 ] && bw_fail "request $i did not end within $STEP_TIMEOUT s: $(tail -n 2 "$WORK/cli_$i.log")"
	[ "$rc" -eq 0 ] || bw_fail "request $i failed (exit $rc): $(tail -n 2 "$WORK/cli_$i.log")"
done
mkdir -p "$WORK/bwrun"
timeout -k 5 "$STEP_TIMEOUT" "$BWRUN" --batch "$REQUESTS" --input "input=$WORK/all.npy" --output-dir "$WORK/bwrun" \
	"$MODELS/mlp.onnx" >"$WORK/bwrun.log" 2>&1 || bw_fail "bwrun failed or did not end within $STEP_TIMEOUT s: $(tail -n 3 "$WORK/bwrun.log")"
python3 - "$WORK" "$REQUESTS" <<'PY' || bw_fail "mlpg's replies differ from bwrun's outputs"
import sys, numpy as np
work, n = sys.argv[1], int(sys.argv[2])
ref = np.load(f"{work}/bwrun/logits.npy")
worst = 0.0
for i in range(n):
    got = np.load(f"{work}/reply_{i}/logits.npy")
    assert got.shape == (1, 10) and got.dtype == np.float32, (got.shape, got.dtype)
    # another device's kernels (the fake's naive GEMM) sum in another order than OpenBLAS
    err = float(np.max(np.abs(got[0] - ref[i])) / np.max(np.abs(ref[i])))
    worst = max(worst, err)
    if err > 1e-4:
        print(f"  request {i}: max difference {err:.3g} of the largest logit")
        sys.exit(1)
print(f"  {n} replies within {worst:.2g} of bwrun's outputs (relative to each row's largest logit)")
PY

echo "== 3 clients at once, $CLIENT_REQUESTS generated requests each, to mlpg"
for c in 1 2 3; do
	bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlpg --count "$CLIENT_REQUESTS" --quiet \
		>"$WORK/client_$c.log" 2>&1 &
done
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")
for c in 1 2 3; do
	tail -n 1 "$WORK/client_$c.log" | sed "s/^/  client $c: /"
	grep -q "ok=$CLIENT_REQUESTS errors=0 timeouts=0" "$WORK/client_$c.log" || bw_fail "client $c lost requests"
done

echo "== telemetry: the GPU healthy, every batch launched and completed"
bw_telemetry /batchwire/gpu >"$WORK/gpu.json"
echo "/batchwire/model,mlpg" | dpdk-telemetry.py -f "$BW_PREFIX" 2>/dev/null | grep -F '"/batchwire/model"' |
	tail -n 1 >"$WORK/model.json"
python3 - "$WORK" "$REQUESTS" "$CLIENT_REQUESTS" <<'PY' || bw_fail "the GPU's counters do not balance"
import json, sys
work, n, per_client = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gpu = json.load(open(f"{work}/gpu.json"))["/batchwire/gpu"]
m = json.load(open(f"{work}/model.json"))["/batchwire/model"]
ok = True
def check(what, got, want):
    global ok
    print(f"  {what:<36} {got} (expected {want})")
    ok &= got == want
check("gpu: in use, module", (gpu["in_use"], gpu["module"]), (1, "fake"))
check("gpu: healthy", (gpu["healthy"], gpu["reason"]), (1, ""))
check("gpu: pool memory registered", gpu["regions"] >= 1 and gpu["registered_bytes"] > 0, True)
check("mlpg: device, available", (m["device"], m["available"]), ("gpu", 1))
check("mlpg: requests answered", (m["requests"], m["requests_done"]), (n + 3 * per_client,) * 2)
check("mlpg: batches launched", (m["exec_batches_started"], m["gpu_launched"]), (m["batches"],) * 2)
check("mlpg: batches completed", (m["exec_batches_done"], m["gpu_completed"]), (m["batches"],) * 2)
check("mlpg: failed", (m["failed"], m["exec_batches_failed"], m["gpu_faulted"], m["gpu_launch_errors"]), (0, 0, 0, 0))
check("mlpg: in flight", (m["inflight"], m["gpu_in_flight"]), (0, 0))
by_slot = m["gpu_launches_by_size_slot"]
check("mlpg: launches by (size, slot) add up", sum(sum(v) for v in by_slot.values()), m["gpu_launched"])
check("mlpg: launches of each size are its batches", {k: sum(v) for k, v in by_slot.items() if sum(v)},
      {k: v for k, v in m["sizes"].items() if v})
print(f"  mlpg: batch sizes {m['sizes']}, padding rows {m['padding_rows']}, launch to completion seen "
      f"{m['exec_compute_us']} us over {m['batches']} batches (the fake runs on the CPU: not a timing)")
ok &= any(int(size) > 1 for size in m["sizes"])
sys.exit(0 if ok else 1)
PY

echo "== a reload of mlpg (its file again) while 3 clients send to it"
for c in 1 2 3; do
	bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlpg --count "$CLIENT_REQUESTS" --quiet \
		>"$WORK/reload_client_$c.log" 2>&1 &
done
sleep 0.2
out=$(bw_telemetry "/batchwire/reload,mlpg")
echo "$out" | grep -q '"status": "ok"' || bw_fail "the GPU model's reload failed: $out"
echo "  $(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["/batchwire/reload"]["lines"][0])')"
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")
for c in 1 2 3; do
	grep -q "ok=$CLIENT_REQUESTS errors=0 timeouts=0" "$WORK/reload_client_$c.log" ||
		bw_fail "client $c lost requests during the reload: $(tail -n 1 "$WORK/reload_client_$c.log")"
done
echo "  3 clients, ${CLIENT_REQUESTS} requests each: every one answered OK across the reload"
mkdir -p "$WORK/after"
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlpg --tensor "input=$WORK/in_0.npy" --quiet \
	--output-dir "$WORK/after" >/dev/null 2>&1 || bw_fail "a request after the reload failed"
echo "/batchwire/model,mlpg" | dpdk-telemetry.py -f "$BW_PREFIX" 2>/dev/null | grep -F '"/batchwire/model"' |
	tail -n 1 >"$WORK/model.json"
python3 - "$WORK" <<'PY' || bw_fail "after the reload: the reply or the counters are wrong"
import json, sys, numpy as np
work = sys.argv[1]
ref = np.load(f"{work}/bwrun/logits.npy")[0]
got = np.load(f"{work}/after/logits.npy")[0]
err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
m = json.load(open(f"{work}/model.json"))["/batchwire/model"]
print(f"  after it: a reply within {err:.2g} of bwrun's; reloads {m['reloads']}; launched {m['gpu_launched']}, "
      f"completed {m['gpu_completed']} of {m['batches']} batches; in flight {m['gpu_in_flight']}")
ok = err <= 1e-4 and m["reloads"] == 1 and m["gpu_launched"] == m["gpu_completed"] == m["batches"]
sys.exit(0 if ok and m["gpu_in_flight"] == 0 and m["failed"] == 0 else 1)
PY

echo "== stopping batchwire (SIGTERM)"
bw_daemon_stop
echo "PASS"
