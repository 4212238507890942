#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The HTTP control server end to end: batchwire serving the MLP with its management address on the
# server namespace's loopback (the default 127.0.0.1:8000).
#  1. While ResNet-50 loads (seconds), /v2/health/live answers 200 and /v2/health/ready 400: ready
#     means every model loaded and every lcore serving, not merely the process up.
#  2. bwcli sends requests; then http_check.py reads it with tritonclient.http (liveness, readiness,
#     server and model metadata; inference of the MLP in JSON and binary tensors, outputs equal to
#     bwrun's on the same inputs; 16 requests 8 at a time; a refused shape) and prometheus_client's
#     parser (every family of a scrape), and
#     dashboard_check.py checks that deploy/grafana/batchwire.json queries only what the scrape has.
#  3. bwcli top under load shows the MLP's rate and latencies and the lcores' busy share.
#  4. SIGTERM while ResNet-50 requests over HTTP are in flight: readiness 400 while the lcores drain,
#     every request answered: 200 (taken before the stop), 429 (the batcher full) or 503 (not yet
#     taken when it stopped), none lost.
#  5. --drain-grace-ms: after SIGTERM readiness is off and PING says DRAINING while requests are
#     still served, then the drain and its line.
#
# Usage (as root): tests/integration/http_netns.sh BATCHWIRE BWCLI MODELS_DIR BWRUN
set -u
BW_TAG=http
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE BWCLI MODELS_DIR BWRUN}
BWCLI=${2:?usage: $0 BATCHWIRE BWCLI MODELS_DIR BWRUN}
MODELS=${3:?usage: $0 BATCHWIRE BWCLI MODELS_DIR BWRUN}
BWRUN=${4:?usage: $0 BATCHWIRE BWCLI MODELS_DIR BWRUN}
REQUESTS=200
BW_TMP=$(mktemp -d /tmp/batchwire-http.XXXXXX)

bw_env_check
python3 -c 'import tritonclient.http, prometheus_client' 2>/dev/null ||
	bw_skip "tritonclient[http] and prometheus-client are not installed (pip install 'tritonclient[http]' prometheus-client)"
for m in mlp resnet50; do
	[ -f "$MODELS/$m.onnx" ] || bw_skip "$MODELS/$m.onnx is missing (the models/ targets need python3 with onnx and numpy)"
done
bw_net_up
trap 'rc=$?; rm -rf "$BW_TMP"; (exit $rc); bw_cleanup' EXIT

probe() { # URL path -> HTTP status code, 000 when nothing listens
	ip netns exec "$BW_SRV_NS" python3 -c '
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen("http://127.0.0.1:8000" + sys.argv[1], timeout=2).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")' "$1"
}

# 1. start with ResNet-50 beside the MLP and watch the probes while it loads
OPENBLAS_NUM_THREADS=1 ip netns exec "$BW_SRV_NS" "$BATCHWIRE" --no-huge -m 2048 --no-pci --file-prefix "$BW_PREFIX" -l 0-1 \
	--vdev "net_af_packet0,iface=$BW_SRV_IF,$BW_AF_PACKET_ARGS" -- --ip "$BW_SERVER_IP" --mtu "$BW_MTU" \
	--model resnet50="$MODELS/resnet50.onnx" --model-opt resnet50.max_batch_size=1 \
	--model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8 --model-opt mlp.allowed_batch_sizes=1,2,4,8 \
	--http-infer-slots 16 >"$BW_LOG" 2>&1 &
BW_DAEMON_PID=$!
# one watcher polling both probes every 10 ms until ready (a process a probe would be too slow)
watch=$(ip netns exec "$BW_SRV_NS" python3 -c '
import time, urllib.request, urllib.error
def code(path):
    try:
        return urllib.request.urlopen("http://127.0.0.1:8000" + path, timeout=2).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return 0
seen, deadline = set(), time.time() + 60
while time.time() < deadline:
    live, ready = code("/v2/health/live"), code("/v2/health/ready")
    seen.add((live, ready))
    if ready == 200:
        break
    time.sleep(0.01)
print("loading" if (200, 400) in seen else "never-loading", ready)')
ready=${watch##* }
seen_loading=$([ "${watch%% *}" = loading ] && echo 1 || echo 0)
kill -0 "$BW_DAEMON_PID" 2>/dev/null || bw_fail "batchwire exited during start-up: $(tail -n 3 "$BW_LOG")"
[ "$ready" = 200 ] || bw_fail "never ready within 60 s: ready $ready; $(tail -n 3 "$BW_LOG")"
grep -q "serving on" "$BW_LOG" || bw_fail "ready before serving: $(tail -n 3 "$BW_LOG")"
[ "$seen_loading" = 1 ] || bw_fail "no probe saw it live and not yet ready while ResNet-50 loaded"
echo "while the models loaded: live 200, ready 400; then ready 200"

# 2. load, then the clients nobody here wrote
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --count "$REQUESTS" --quiet | tail -n 1 |
	grep -q "ok=$REQUESTS errors=0" || bw_fail "the MLP did not answer $REQUESTS requests"
ip netns exec "$BW_SRV_NS" python3 "$(dirname "$0")/http_check.py" --model mlp \
	--inputs "input:FP32:-1,784" --outputs "logits:FP32:-1,10" --min-requests "$REQUESTS" \
	--bwrun "$BWRUN" --model-file "$MODELS/mlp.onnx" --batch-sizes 1,4 ||
	bw_fail "tritonclient or prometheus_client disagreed"
ip netns exec "$BW_SRV_NS" python3 "$(dirname "$0")/dashboard_check.py" "$(dirname "$0")/../../deploy/grafana/batchwire.json" ||
	bw_fail "the Grafana dashboard names a metric or label /metrics does not have"
# 3. bwcli top, beside a load: the MLP's rate and latencies show, and every lcore's busy share
bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --count 3000 --quiet >/dev/null 2>&1 &
load=$!
sleep 0.3
top=$(ip netns exec "$BW_SRV_NS" "$BWCLI" top --count 2 --interval-ms 400) || bw_fail "bwcli top failed: $top"
wait "$load"
echo "$top" | sed 's/^/  /'
echo "$top" | awk '$1 == "mlp" && $2 > 0 && $3 > 0 && $4 >= $3 { ok = 1 } END { exit !ok }' ||
	bw_fail "bwcli top showed no MLP rate or latency under load"
echo "$top" | grep -q "busy: poll lcore 1 " || bw_fail "bwcli top showed no polling lcore's busy share"
out=$(ip netns exec "$BW_SRV_NS" "$BWCLI" top --http 127.0.0.1:1 --count 1 2>&1) && bw_fail "top without a server exited 0"
echo "$out" | grep -q "cannot reach the control server" || bw_fail "top without a server: $out"
out=$(probe /nope)
[ "$out" = 404 ] || bw_fail "an unknown path answered $out, not 404"

# 4. drain: 16 ResNet-50 requests over HTTP (one batch each, one worker: a second or more of work),
#    then SIGTERM. Readiness turns false while the lcores finish what they took; every request the
#    batcher took is answered 200, the others 429 or 503, none lost.
ip netns exec "$BW_SRV_NS" python3 -c '
import concurrent.futures, sys, time, urllib.request, urllib.error
import numpy as np, tritonclient.http as httpclient
def one(i):
    c = httpclient.InferenceServerClient(url="127.0.0.1:8000", network_timeout=60)
    name = c.get_model_metadata("resnet50")["inputs"][0]["name"]
    t = httpclient.InferInput(name, [1, 3, 224, 224], "FP32")
    t.set_data_from_numpy(np.full((1, 3, 224, 224), i / 16, np.float32), binary_data=True)
    try:
        c.infer("resnet50", [t])
        return 200
    except Exception as e:
        print(e, file=sys.stderr)
        return int(str(e)[1:4]) if str(e)[:1] == "[" else str(e)[:80].replace(" ", "_")
with concurrent.futures.ThreadPoolExecutor(16) as pool:
    codes = list(pool.map(one, range(16)))
print(" ".join(str(c) for c in codes))' >"$BW_TMP/drain_codes" 2>"$BW_TMP/drain_errors" &
clients=$!
sleep 0.5
ip netns exec "$BW_SRV_NS" python3 -c '
import time, urllib.request, urllib.error
def code():
    try:
        return urllib.request.urlopen("http://127.0.0.1:8000/v2/health/ready", timeout=1).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return 0
seen, end = [], time.time() + 5
while time.time() < end:
    c = code()
    if not seen or seen[-1] != c:
        seen.append(c)
    if c == 0:
        break
    time.sleep(0.005)
print(" ".join(map(str, seen)))' >"$BW_TMP/drain_ready" 2>&1 &
watcher=$!
# the watcher polling before the stop (python's start is slower than a drain of nothing in flight)
sleep 0.5
bw_daemon_stop
wait "$watcher" "$clients"
echo "during the drain: readiness $(cat "$BW_TMP/drain_ready"); the 16 requests: $(cat "$BW_TMP/drain_codes")"
sort "$BW_TMP/drain_errors" | uniq -c | sed 's/^/  /'
grep -Eq "^(200 )?400( 0)?$" "$BW_TMP/drain_ready" ||
	bw_fail "readiness during the drain went $(cat "$BW_TMP/drain_ready"), not 400 then gone"
# 429: the model's batcher was full (max_batch_size 1 leaves it few jobs), an answer too
awk '{ for (i = 1; i <= NF; i++) if ($i != 200 && $i != 429 && $i != 503) bad = 1; if (NF != 16) bad = 1 }
	END { exit bad }' "$BW_TMP/drain_codes" ||
	bw_fail "a request during the drain got no answer of 200, 429 or 503: $(cat "$BW_TMP/drain_codes")"
grep -q 200 "$BW_TMP/drain_codes" || bw_fail "no request taken before the drain was answered"

# 5. a grace period (--drain-grace-ms): SIGTERM, and for 1.5 s readiness is off and PING replies
#    say DRAINING while requests are still answered; then the drain, exit 0, its line.
OPENBLAS_NUM_THREADS=1 ip netns exec "$BW_SRV_NS" "$BATCHWIRE" --no-huge -m 1024 --no-pci --file-prefix "$BW_PREFIX" \
	-l 0-1 --vdev "net_af_packet0,iface=$BW_SRV_IF,$BW_AF_PACKET_ARGS" -- --ip "$BW_SERVER_IP" --mtu "$BW_MTU" \
	--model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8 --drain-grace-ms 1500 >"$BW_LOG" 2>&1 &
BW_DAEMON_PID=$!
for _ in $(seq 100); do [ "$(probe /v2/health/ready)" = 200 ] && break; sleep 0.1; done
[ "$(probe /v2/health/ready)" = 200 ] || bw_fail "the daemon with a grace period never got ready: $(tail -n 3 "$BW_LOG")"
kill -TERM "$BW_DAEMON_PID"
sleep 0.2
ready=$(probe /v2/health/ready)
ping=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" ping --count 1 2>&1)
load=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model mlp --count 20 --quiet 2>&1 | tail -n 1)
kill -0 "$BW_DAEMON_PID" 2>/dev/null || bw_fail "batchwire exited within its grace period"
wait "$BW_DAEMON_PID"
rc=$?
BW_DAEMON_PID=
echo "in the grace period: ready $ready; $(echo "$ping" | head -n 1); $load"
echo "  $(grep 'drained in' "$BW_LOG")"
[ "$ready" = 400 ] || bw_fail "readiness in the grace period was $ready, not 400"
echo "$ping" | grep -q "server draining" || bw_fail "PING's reply did not say DRAINING: $ping"
echo "$load" | grep -q "ok=20 errors=0" || bw_fail "requests in the grace period were not all answered: $load"
[ "$rc" -eq 0 ] || bw_fail "batchwire exited $rc after the grace period"
awk '/drained in/ { ms = $4; n = $(NF - 5) } END { exit !(ms >= 1500 && n >= 21) }' "$BW_LOG" ||
	bw_fail "the drain line is not 1500 ms or more with the 21 replies of the grace period: $(grep 'drained' "$BW_LOG")"
echo "PASS: probes, tritonclient and prometheus_client read the control server; readiness off while draining, a grace period honoured"
