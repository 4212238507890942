#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Model versions and hot reload end to end: batchwire serving the MLP from a directory of versions
# (Triton's layout: mlp/1/model.onnx, mlp/2/...), under bwload at a steady rate from the client
# namespace, while the repository changes and the model is reloaded three times:
#  1. version 2 appears (its logits those of version 1 plus one): SIGHUP; version 2 serves;
#  2. a broken version 3 appears (not an ONNX file): /batchwire/reload,mlp says why it failed and
#     version 2 still serves;
#  3. version 3 is replaced by a model with other tensors: HTTP POST /v2/repository/models/mlp/load
#     answers 400 naming the difference; then it is removed and the same call reloads version 2.
# Requests pinned to version 1 during the first reload are answered by version 1 or refused, never
# by version 2 (pinned.py). Every bwload request is answered OK (0 errors, 0 timeouts); after each
# reload bwcli's outputs for
# one fixed input equal bwrun's on the version that serves; MODEL_INFO and the HTTP metadata name
# that version; a request naming another version is NOT_FOUND; the version's counters add up.
# Beside it, mlpv serves two versions at once (version_policy latest 2) from a repository of its
# own: 2 (the default) and 1, by model_id and over HTTP; the SIGHUP moves it to 3 (version 1's file
# again) and 2, and requests follow.
#
# Usage (as root): tests/integration/reload_netns.sh BATCHWIRE BWCLI BWLOAD BWRUN MODELS_DIR
set -u
BW_TAG=rld
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE BWCLI BWLOAD BWRUN MODELS_DIR}
BWCLI=${2:?usage: $0 BATCHWIRE BWCLI BWLOAD BWRUN MODELS_DIR}
BWLOAD=${3:?usage: $0 BATCHWIRE BWCLI BWLOAD BWRUN MODELS_DIR}
BWRUN=${4:?usage: $0 BATCHWIRE BWCLI BWLOAD BWRUN MODELS_DIR}
MODELS=${5:?usage: $0 BATCHWIRE BWCLI BWLOAD BWRUN MODELS_DIR}
RATE=400
COUNT=4800 # 12 s at RATE: the three reloads happen inside it

[ -f "$MODELS/mlp.onnx" ] || bw_skip "$MODELS/mlp.onnx is missing (the models/ targets need python3 with onnx and numpy)"
python3 -c 'import onnx, numpy' 2>/dev/null || bw_skip "python3 with onnx and numpy is needed to write the versions"
bw_env_check
bw_net_up
WORK=$(mktemp -d /tmp/bw-rld.XXXXXX)
trap 'rc=$?; rm -rf "$WORK"; (exit $rc); bw_cleanup' EXIT

REPO=$WORK/repo/mlp
mkdir -p "$REPO/1"
cp "$MODELS/mlp.onnx" "$REPO/1/model.onnx"
# version 2: the same graph, every logit one more (its last bias + 1); a model of other tensors
python3 - "$MODELS/mlp.onnx" "$WORK/v2.onnx" "$WORK/other.onnx" <<'PY' || bw_fail "cannot write the versions"
import sys, numpy as np, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
# the node making logits adds the last bias (an initializer) to the last product
last = next(n for n in m.graph.node if "logits" in n.output)
bias = next(i for i in m.graph.initializer if i.name in last.input)
bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(bias) + 1.0, bias.name))
onnx.save(m, sys.argv[2])
m = onnx.load(sys.argv[1])
m.graph.output[0].name = "scores"
for n in m.graph.node:
    n.output[:] = ["scores" if o == "logits" else o for o in n.output]
onnx.save(m, sys.argv[3])
PY

# the fixed input and what each version answers to it (bwrun, the same runtime outside the daemon)
"$BWRUN" "$REPO/1/model.onnx" --seed 7 --save-inputs "$WORK/in" --output-dir "$WORK/out1" >/dev/null ||
	bw_fail "bwrun failed on version 1"
"$BWRUN" "$WORK/v2.onnx" --input "input=$WORK/in/input.npy" --output-dir "$WORK/out2" >/dev/null ||
	bw_fail "bwrun failed on version 2"

VREPO=$WORK/repo/mlpv
mkdir -p "$VREPO/1" "$VREPO/2"
cp "$MODELS/mlp.onnx" "$VREPO/1/model.onnx"
cp "$WORK/v2.onnx" "$VREPO/2/model.onnx"

# versions_serve "V W" OUTS: mlpv's HTTP metadata lists V and W; MODEL_INFO names the highest; a
# request naming no version (model_id 2: echo is 0, mlp 1) gets OUTS' outputs (OUTS[0]: the highest's),
# one naming each version those of its own (OUTS[i]), over UDP and HTTP
versions_serve() {
	local vs=$1 outs=($2) out i=0 v
	out=$(ip netns exec "$BW_SRV_NS" python3 -c '
import json, urllib.request
print(" ".join(json.load(urllib.request.urlopen("http://127.0.0.1:8000/v2/models/mlpv", timeout=5))["versions"]))')
	[ "$out" = "$vs" ] || bw_fail "mlpv's HTTP metadata lists versions '$out', not '$vs'"
	out=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" info --model mlpv 2>&1)
	echo "$out" | grep -q "^version: ${vs##* }$" || bw_fail "mlpv's MODEL_INFO does not say version ${vs##* }: $out"
	out=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model 2 --tensor "input=$WORK/in/input.npy" \
		--expect "$WORK/out${outs[0]}" --quiet 2>&1 | tail -n 1)
	echo "$out" | grep -q "ok=1 errors=0" || bw_fail "mlpv naming no version: not version ${vs##* }'s outputs: $out"
	for v in $vs; do
		i=$((i + 1))
		out=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model $(( (v << 16) + 2 )) \
			--tensor "input=$WORK/in/input.npy" --expect "$WORK/out${outs[$i]}" --quiet 2>&1 | tail -n 1)
		echo "$out" | grep -q "ok=1 errors=0" || bw_fail "mlpv version $v: not its outputs: $out"
		out=$(ip netns exec "$BW_SRV_NS" python3 - "$v" "$WORK/in/input.npy" "$WORK/out${outs[$i]}/logits.npy" <<'PY'
import json, sys, urllib.request
import numpy as np
x = np.load(sys.argv[2]).astype(np.float32)
body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                               "data": x.ravel().tolist()}]}).encode()
r = urllib.request.Request("http://127.0.0.1:8000/v2/models/mlpv/versions/%s/infer" % sys.argv[1], data=body,
                           headers={"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(r, timeout=10))
got = np.array(reply["outputs"][0]["data"], dtype=np.float32).reshape(np.load(sys.argv[3]).shape)
print("ok" if np.array_equal(got, np.load(sys.argv[3])) else "differs by %g" % np.abs(got - np.load(sys.argv[3])).max())
PY
)
		[ "$out" = ok ] || bw_fail "mlpv version $v over HTTP: its outputs $out"
	done
	echo "  mlpv serves versions $vs: each answers its own outputs (UDP and HTTP), no version named gets ${vs##* }'s"
}

# serves: VERSION -> the fixed input's reply equals that version's outputs, MODEL_INFO and the HTTP
# metadata name it
serves() {
	local v=$1 out
	out=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --tensor "input=$WORK/in/input.npy" \
		--expect "$WORK/out$v" --quiet 2>&1 | tail -n 1)
	echo "$out" | grep -q "ok=1 errors=0" || bw_fail "the reply is not version $v's: $out"
	out=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" info --model mlp 2>&1)
	echo "$out" | grep -q "^version: $v$" || bw_fail "MODEL_INFO does not say version $v: $out"
	out=$(ip netns exec "$BW_SRV_NS" python3 -c '
import json, urllib.request
print(json.load(urllib.request.urlopen("http://127.0.0.1:8000/v2/models/mlp", timeout=5))["versions"])')
	[ "$out" = "['$v']" ] || bw_fail "the HTTP metadata lists versions $out, not ['$v']"
	echo "  version $v serves: outputs equal to bwrun's on it, MODEL_INFO and metadata say so"
}
version_now() {
	bw_telemetry "/batchwire/model,mlp" | python3 -c 'import json,sys; print(json.load(sys.stdin)["/batchwire/model"]["version"])'
}
wait_version() { # VERSION: the telemetry's served version becomes it within 20 s
	for _ in $(seq 200); do
		[ "$(version_now)" = "$1" ] && return 0
		sleep 0.1
	done
	bw_fail "version $1 did not come to serve within 20 s (serving $(version_now)): $(tail -n 5 "$BW_LOG")"
}
http_post() { # PATH -> "CODE BODY"
	ip netns exec "$BW_SRV_NS" python3 -c '
import sys, urllib.request, urllib.error
r = urllib.request.Request("http://127.0.0.1:8000" + sys.argv[1], data=b"", method="POST")
try:
    with urllib.request.urlopen(r, timeout=60) as f:
        print(f.status, f.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())' "$1"
}

echo "== the MLP from $REPO (version_policy latest), bwload at $RATE/s meanwhile"
# A queue deep enough for this 2-core host's stalls: both CPUs run busy-polling lcores, and bwload,
# bwcli, python and the reload's work all take turns on them. With the default 10 batches, runs of
# this script here had 8 to 19 of the 4800 requests refused UNAVAILABLE (the queue full, not the
# reload failing them); on a host whose control threads have CPUs of their own, no stall is expected.
bw_daemon_start "$BATCHWIRE" --model mlp="$WORK/repo/mlp" --model-opt mlp.max_batch_size=8 \
	--model-opt mlp.allowed_batch_sizes=1,2,4,8 --model-opt mlp.batch_timeout_micros=200 \
	--model-opt mlp.max_enqueued_batches=${RELOAD_QUEUE:-1000} --model mlpv="$VREPO" \
	--model-opt mlpv.version_policy="latest 2" --model-opt mlpv.max_batch_size=8
grep -q "model 'mlp' (id 1) version 1 from $REPO/1/model.onnx" "$BW_LOG" ||
	bw_fail "the start-up line does not name version 1: $(grep "model 'mlp'" "$BW_LOG")"
serves 1
versions_serve "1 2" "2 1 2"

bw_cli "$BWLOAD" --socket --server "$BW_SERVER_IP" --mtu "$BW_MTU" --count "$COUNT" --rate "$RATE" --quiet \
	--mix "model=mlp" >"$WORK/load.out" 2>&1 &
load=$!
sleep 1

# 1. a new version, and SIGHUP (mlpv's version 3 too: version 1's file again)
mkdir -p "$REPO/2" && cp "$WORK/v2.onnx" "$REPO/2/model.onnx"
mkdir -p "$VREPO/3" && cp "$MODELS/mlp.onnx" "$VREPO/3/model.onnx"
# requests pinned to version 1 meanwhile: answered by version 1 or refused, never by version 2
bw_cli python3 "$(dirname "$0")/pinned.py" --server "$BW_SERVER_IP" --model-id 1 --version 1 \
	--input "$WORK/in/input.npy" --want "$WORK/out1/logits.npy" --other "$WORK/out2/logits.npy" \
	--seconds 4 >"$WORK/pinned.log" 2>&1 &
pinned=$!
sleep 1
kill -HUP "$BW_DAEMON_PID"
wait_version 2
wait "$pinned" || bw_fail "a request pinned to version 1 was answered by another: $(cat "$WORK/pinned.log")"
grep -q "'OK': [1-9]" "$WORK/pinned.log" && grep -q "'NOT_FOUND': [1-9]" "$WORK/pinned.log" ||
	bw_fail "the pinned requests did not span the reload: $(cat "$WORK/pinned.log")"
echo "  $(cat "$WORK/pinned.log")"
serves 2
for _ in $(seq 200); do
	grep -q "model 'mlpv': version 3 serves" "$BW_LOG" && break
	sleep 0.1
done
versions_serve "2 3" "1 2 1"
bw_telemetry "/batchwire/model,mlpv/2" | python3 -c '
import json, sys
m = json.load(sys.stdin)["/batchwire/model"]
sys.exit(0 if m["version"] == 2 and sorted(m["versions_served"]) == [2, 3] else 1)' ||
	bw_fail "/batchwire/model,mlpv/2 is not version 2's of [2, 3]: $(bw_telemetry "/batchwire/model,mlpv/2")"
out=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model $(( (1 << 16) + 1 )) --rows 1 2>&1)
echo "$out" | grep -q "serves version 2, not version 1" || bw_fail "a request naming version 1 was not refused: $out"
echo "  a request naming version 1: $(echo "$out" | grep -o "model 'mlp' serves version 2, not version 1")"

# 2. a broken version: the reload fails, saying why, and version 2 serves on
mkdir -p "$REPO/3" && echo "not an onnx file" >"$REPO/3/model.onnx"
out=$(bw_telemetry "/batchwire/reload,mlp")
echo "$out" | grep -q '"status": "failed"' || bw_fail "reloading a broken version did not fail: $out"
echo "$out" | grep -q "version 2 still serves" || bw_fail "the failed reload does not say version 2 serves: $out"
echo "  broken version 3: $(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["/batchwire/reload"]["lines"][0])')"
serves 2

# 3. other tensors: refused over HTTP, naming them; removed, the same call reloads version 2
cp "$WORK/other.onnx" "$REPO/3/model.onnx"
out=$(http_post /v2/repository/models/mlp/load)
case "$out" in "400 "*"not the served version's tensors"*) ;; *) bw_fail "a version of other tensors: $out" ;; esac
echo "  version 3 of other tensors: ${out:0:160}"
rm -rf "$REPO/3"
out=$(http_post /v2/repository/models/mlp/load)
case "$out" in "200 "*"version 2 serves"*) ;; *) bw_fail "reloading version 2 over HTTP: $out" ;; esac
serves 2
out=$(http_post /v2/repository/models/nope/load)
case "$out" in "404 "*) ;; *) bw_fail "loading an unknown model answered $out" ;; esac

wait "$load" || bw_fail "bwload exited $?: $(tail -n 3 "$WORK/load.out")"
tail -n 1 "$WORK/load.out" | sed 's/^/  bwload: /'
grep -q "sent=$COUNT ok=$COUNT errors=0 timeouts=0" "$WORK/load.out" ||
	bw_fail "requests failed during the reloads: $(tail -n 1 "$WORK/load.out"); the server's replies by status: $(
		bw_telemetry /batchwire/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["/batchwire/stats"]["replies_by_status"])'); $(
		grep -v "^  " "$WORK/load.out" | head -n 5)"
bw_telemetry "/batchwire/model,mlp" | python3 -c '
import json, sys
m = json.load(sys.stdin)["/batchwire/model"]
want = {"version": 2, "reloads": 2, "reload_failures": 2, "versions_available": [1, 2]}
got = {k: m.get(k) for k in want}
print("  telemetry:", got)
sys.exit(0 if got == want else 1)' || bw_fail "the model's version counters are not 2 reloads and 2 failures"
grep -q "model 'mlp': version 2 serves (from $REPO/2/model.onnx; version 1 before)" "$BW_LOG" ||
	bw_fail "no log line for the switch to version 2"
bw_daemon_stop
echo "PASS"
