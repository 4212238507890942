#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# ONNX models served end to end: batchwire on af_packet (namespaces of netns.sh) serves the MLP, the
# small CNN and the transformer from the models/ build outputs, each on the main lcore as its CPU
# worker, while the polling lcore batches. bwcli sends requests from the client namespace:
#   - distinct MLP inputs, one request each: every reply must equal bwrun's output for the same
#     input (bwrun runs the same graph in-process on a batch of all of them);
#   - CNN and transformer requests likewise, fewer of them;
#   - 4 clients at once (they share batching windows: batches larger than 1 must appear);
#   - wrong shape, wrong dtype, too many rows, a token outside the vocabulary: INVALID_ARGUMENT,
#     each naming the rule;
#   - where the CPU kernels run at the amx level, the MLP again as model mlp16 at precision bf16,
#     its replies equal to `bwrun --precision bf16`'s outputs (elsewhere that part is left out,
#     and said so: the refusal below amx is test_opt's and bwrun-isa's);
# then /batchwire/model,NAME and /batchwire/stats must balance (requests = replies, every batch
# completed, the executor started and finished every batch) and SIGTERM must stop it with exit 0.
#
# Usage (as root): models_netns.sh BATCHWIRE BWCLI BWRUN MODELS_DIR
set -u
BW_TAG=models
. "$(dirname "$0")/netns.sh"
BATCHWIRE=$1
BWCLI=$2
BWRUN=$3
MODELS=$4
MLP_REQUESTS=${MLP_REQUESTS:-40}
OTHER_REQUESTS=${OTHER_REQUESTS:-6}
CLIENT_REQUESTS=${CLIENT_REQUESTS:-300}

for m in mlp cnn minilm; do
	[ -f "$MODELS/$m.onnx" ] || bw_skip "$MODELS/$m.onnx is missing (the models/ targets need python3 with onnx and numpy)"
done
python3 -c 'import numpy' 2>/dev/null || bw_skip "python3 cannot import numpy"
bw_env_check
bw_net_up

WORK=$(mktemp -d /tmp/bw-models.XXXXXX)
trap 'bw_cleanup; rm -rf "$WORK"' EXIT

BF16_MODEL=()
if OPENBLAS_NUM_THREADS=1 "$BWRUN" "$MODELS/mlp.onnx" 2>/dev/null | grep -q "^cpu    kernels amx"; then
	BF16_MODEL=(--model mlp16="$MODELS/mlp.onnx" --model-opt mlp16.precision=bf16 --model-opt mlp16.max_batch_size=8
		--model-opt mlp16.allowed_batch_sizes=1,2,4,8 --model-opt mlp16.batch_timeout_micros=300)
fi

# Allowed sizes with padding, a short window: concurrent clients share batches, single ones pad.
bw_daemon_start "$BATCHWIRE" \
	--model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8 --model-opt mlp.allowed_batch_sizes=1,2,4,8 \
	--model-opt mlp.batch_timeout_micros=300 --model-opt mlp.num_batch_threads=2 \
	--model cnn="$MODELS/cnn.onnx" --model-opt cnn.max_batch_size=4 --model-opt cnn.allowed_batch_sizes=2,4 \
	--model minilm="$MODELS/minilm.onnx" --model-opt minilm.max_batch_size=2 --model-opt minilm.allowed_batch_sizes=1,2 \
	"${BF16_MODEL[@]}"
grep -E "batchwire: model '" "$BW_LOG" | sed 's/^/  /'

# Inputs: one .npy per request (one row each), and the same rows stacked for bwrun.
python3 - "$WORK" "$MLP_REQUESTS" "$OTHER_REQUESTS" <<'EOF' || bw_fail "cannot write the inputs"
import sys, numpy as np
work, n_mlp, n_other = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(20261129)
def save(model, name, rows):
    np.save(f"{work}/{model}_{name}_all.npy", rows)
    for i, row in enumerate(rows):
        np.save(f"{work}/{model}_{name}_{i}.npy", row[None])
save("mlp", "input", rng.uniform(-1, 1, (n_mlp, 784)).astype(np.float32))
save("cnn", "image", rng.uniform(-1, 1, (n_other, 1, 28, 28)).astype(np.float32))
ids = rng.integers(0, 30522, (n_other, 128), dtype=np.int64)
mask = np.ones((n_other, 128), dtype=np.int64)
for i in range(n_other):
    mask[i, 128 - 8 * (i + 1):] = 0  # padding of different lengths
save("minilm", "input_ids", ids)
save("minilm", "attention_mask", mask)
bad = ids[:1].copy()
bad[0, 5] = 40000  # outside the 30522-row vocabulary
np.save(f"{work}/minilm_bad_ids.npy", bad)
EOF

# One request per input through the daemon; bwrun on all of them at once. SERVE_FILE (the model's
# file stem, default the model's name) and SERVE_BWRUN (more bwrun arguments) for mlp16.
serve() { # model count output inputs...
	local model=$1 count=$2 output=$3 file=${SERVE_FILE:-$1}
	shift 3
	for i in $(seq 0 $((count - 1))); do
		local args=()
		for name in "$@"; do args+=(--tensor "$name=$WORK/${file}_${name}_$i.npy"); done
		mkdir -p "$WORK/reply_${model}_$i"
		bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model "$model" "${args[@]}" --quiet \
			--output-dir "$WORK/reply_${model}_$i" >"$WORK/cli_${model}_$i.log" 2>&1 ||
			bw_fail "$model request $i failed: $(tail -n 2 "$WORK/cli_${model}_$i.log")"
	done
	local run=()
	for name in "$@"; do run+=(--input "$name=$WORK/${file}_${name}_all.npy"); done
	mkdir -p "$WORK/bwrun_$model"
	# shellcheck disable=SC2086 # SERVE_BWRUN is words
	"$BWRUN" --batch "$count" ${SERVE_BWRUN:-} "${run[@]}" --output-dir "$WORK/bwrun_$model" "$MODELS/$file.onnx" \
		>"$WORK/bwrun_$model.log" 2>&1 || bw_fail "bwrun $model failed: $(tail -n 3 "$WORK/bwrun_$model.log")"
	python3 - "$WORK" "$model" "$count" "$output" <<'EOF' || bw_fail "$model: replies differ from bwrun's outputs"
import sys, numpy as np
work, model, count, output = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ref = np.load(f"{work}/bwrun_{model}/{output}.npy")
assert ref.shape[0] == count, ref.shape
worst, exact = 0.0, 0
for i in range(count):
    got = np.load(f"{work}/reply_{model}_{i}/{output}.npy")
    assert got.shape == (1,) + ref.shape[1:], (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    # Same graph, same kernels; only the batch a row ran in differs (1..8 padded in the daemon,
    # all rows in bwrun), and the BLAS may sum in another order for another row count.
    err = np.max(np.abs(got[0] - ref[i]) / (np.abs(ref[i]) + 1e-3))
    worst = max(worst, float(err))
    exact += bool(np.array_equal(got[0], ref[i]))
    if not np.allclose(got[0], ref[i], rtol=1e-4, atol=1e-5):
        print(f"  {model} request {i}: max relative difference {err:.3g}")
        sys.exit(1)
print(f"  {model}: {count} replies equal bwrun's outputs ({exact} bit for bit, worst relative difference {worst:.2g})")
EOF
}

echo "== distinct inputs, one request each, compared with bwrun"
serve mlp "$MLP_REQUESTS" logits input
serve cnn "$OTHER_REQUESTS" logits image
serve minilm "$OTHER_REQUESTS" embedding input_ids attention_mask
if [ ${#BF16_MODEL[@]} -gt 0 ]; then
	echo "== the MLP at precision bf16 (AMX), compared with bwrun --precision bf16"
	SERVE_FILE=mlp SERVE_BWRUN="--precision bf16" serve mlp16 "$MLP_REQUESTS" logits input
else
	echo "== precision bf16 left out: the CPU kernels do not run at the amx level here"
fi

echo "== 4 clients at once, $CLIENT_REQUESTS generated MLP requests each"
for c in 1 2 3 4; do
	bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --count "$CLIENT_REQUESTS" --quiet \
		>"$WORK/client_$c.log" 2>&1 &
done
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")
for c in 1 2 3 4; do
	tail -n 1 "$WORK/client_$c.log" | sed "s/^/  client $c: /"
	grep -q "ok=$CLIENT_REQUESTS errors=0 timeouts=0" "$WORK/client_$c.log" || bw_fail "client $c lost requests"
done

echo "== bad requests are refused with the rule they break"
expect_error() { # what, expected text, bwcli args...
	local what=$1 text=$2
	shift 2
	local out
	out=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" --retries 0 infer "$@" 2>&1)
	echo "$out" | grep -q "INVALID_ARGUMENT: .*$text" || bw_fail "$what: expected INVALID_ARGUMENT '$text', got: $out"
	echo "  $what: $(echo "$out" | grep -o "INVALID_ARGUMENT.*" | head -n 1)"
}
expect_error "wrong shape" "shape \[1,10\], expected \[N,784\]" --model mlp --shape 1,10
expect_error "wrong dtype" "dtype int32, expected float" --model mlp --dtype int32 --shape 1,784
expect_error "another model's input" "shape \[1,784\], expected \[N,1,28,28\]" --model cnn --tensor image="$WORK/mlp_input_0.npy"
expect_error "wrong input name" "has no input named 'nope'" --model mlp --tensor nope="$WORK/mlp_input_0.npy"
# a token outside the vocabulary fails its own request at admission, never a batch (failed batches
# stay 0 below)
expect_error "token outside the vocabulary" "value 40000 at element 5 is outside \[-30522, 30522)" --model minilm \
	--tensor input_ids="$WORK/minilm_bad_ids.npy" --tensor attention_mask="$WORK/minilm_attention_mask_0.npy"
# ... and among batch-mates: four clients sending good requests while the bad one goes out, each
# good one answered OK (the bad one never reaches a batch, so it cannot fail theirs)
MATE_REQUESTS=5
for c in 1 2 3 4; do
	bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model minilm --count "$MATE_REQUESTS" --quiet \
		--tensor input_ids="$WORK/minilm_input_ids_0.npy" --tensor attention_mask="$WORK/minilm_attention_mask_0.npy" \
		>"$WORK/mate_$c.log" 2>&1 &
done
for _ in 1 2 3; do
	expect_error "token outside the vocabulary, beside batch-mates" "value 40000 at element 5" --model minilm \
		--tensor input_ids="$WORK/minilm_bad_ids.npy" --tensor attention_mask="$WORK/minilm_attention_mask_0.npy"
done
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")
for c in 1 2 3 4; do
	grep -q "ok=$MATE_REQUESTS errors=0 timeouts=0" "$WORK/mate_$c.log" ||
		bw_fail "a batch-mate of the bad request failed: $(tail -n 1 "$WORK/mate_$c.log")"
done
echo "  $((4 * MATE_REQUESTS)) good minilm requests beside the bad ones: all OK"

echo "== counters balance"
model_stats() {
	echo "/batchwire/model,$1" | dpdk-telemetry.py -f "$BW_PREFIX" 2>/dev/null | grep -F '"/batchwire/model"' | tail -n 1
}
MODELS_SERVED="mlp cnn minilm"
[ ${#BF16_MODEL[@]} -gt 0 ] && MODELS_SERVED="$MODELS_SERVED mlp16"
for m in $MODELS_SERVED; do model_stats "$m" >"$WORK/telemetry_$m.json"; done
bw_telemetry /batchwire/stats >"$WORK/stats.json"
python3 - "$WORK" "$MLP_REQUESTS" "$OTHER_REQUESTS" "$CLIENT_REQUESTS" "$MODELS_SERVED" "$MATE_REQUESTS" <<'EOF' || bw_fail "counters do not balance"
import json, sys
work, n_mlp, n_other, n_client = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
served = sys.argv[5].split()
n_mates = 4 * int(sys.argv[6])
ok = True
def check(what, got, want):
    global ok
    print(f"  {what:<40} {got} (expected {want})")
    ok &= got == want
accepted = {"mlp": n_mlp + 4 * n_client, "cnn": n_other, "minilm": n_other + n_mates, "mlp16": n_mlp}
for m in served:
    want = accepted[m]
    s = json.load(open(f"{work}/telemetry_{m}.json"))["/batchwire/model"]
    check(f"{m}: precision", s["precision"], "bf16" if m == "mlp16" else "fp32")
    check(f"{m}: requests (batched)", s["requests"], want)
    check(f"{m}: requests answered", s["requests_done"], want)
    check(f"{m}: batches started by the executor", s["exec_batches_started"], s["batches"])
    check(f"{m}: batches finished by the executor", s["exec_batches_done"], s["batches"])
    check(f"{m}: failed batches", s["failed"] + s["exec_batches_failed"], 0)
    check(f"{m}: batches in flight", s["inflight"], 0)
    print(f"  {m}: batch sizes {s['sizes']}, padding rows {s['padding_rows']}, compute {s['exec_compute_us']} us")
    if m == "mlp":
        ok &= any(int(size) > 1 for size in s["sizes"])
stats = json.load(open(f"{work}/stats.json"))["/batchwire/stats"]
check("every request got a reply", stats["replies"], stats["requests"])
check("drops", stats["drops"], 0)
sys.exit(0 if ok else 1)
EOF

echo "== stopping batchwire (SIGTERM)"
bw_daemon_stop
echo "PASS"
