#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Peer: the serving system a user would pick instead of batchwire, on the same model, cores and
# batching window. MLServer 1.7.1 serves the MLP (bench/peer/mlserver/: onnxruntime on one thread,
# adaptive batching max_batch_size 8, max_batch_time 0.0005 s, parallel_workers 0) over KServe v2
# HTTP/JSON, loaded by wrk (Debian's wrk 4.1, closed loop: one request outstanding per connection;
# bench/peer/kserve_v2_infer.lua); batchwire serves the same file (max_batch_size 8,
# allowed_batch_sizes 1,2,4,8, batch_timeout_micros 500) over memif, loaded by bwload closed loop.
# Both figures are taken the same way for both systems, latency from each request's send to its reply:
#   low load   one request outstanding: p50 and p99;
#   max rate   the highest throughput among the concurrency levels (MLServer: wrk connections
#              PEER_LEVELS; batchwire: bwload --closed BW_LEVELS) whose p99 is under 10 ms and
#              that had no errors.
# Cores: the server on SERVER_CPU, the generator on GEN_CPU. BW_LAYOUT=one (the default) runs all
# of batchwire on SERVER_CPU as MLServer is: one lcore that polls the port and runs the MLP
# (`-l SERVER_CPU`, the main lcore both polls and works), under `taskset -c SERVER_CPU` like MLServer.
# BW_LAYOUT=split is batchwire's usual layout, a polling lcore on SERVER_CPU and the worker (main
# lcore) on GEN_CPU, sharing that core with bwload (which then sleeps --idle-us IDLE_US when idle):
# batchwire then has two cores to MLServer's one, but one of them shared with its generator.
# Prints both systems' tables, then the two ratio lines last.
#
# Usage (as root): bench/peer/peer_vs_batchwire.sh [BUILD_DIR] [SECONDS]
#   PEER_VENV (default /tmp/peer-venv: python3 -m venv, then
#   pip install mlserver==1.7.1 'uvloop<0.22' onnxruntime numpy); apt-get install wrk.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
SECONDS_RUN=${2:-8}
PEER_VENV=${PEER_VENV:-/tmp/peer-venv}
SERVER_CPU=${SERVER_CPU:-1}
GEN_CPU=${GEN_CPU:-0}
BW_LAYOUT=${BW_LAYOUT:-one}
IDLE_US=${IDLE_US:-20}
PEER_LEVELS=${PEER_LEVELS:-"1 2 4 8 16"}
BW_LEVELS=${BW_LEVELS:-"1 2 4 8 16 32"}
P99_LIMIT_US=10000
HTTP_PORT=${HTTP_PORT:-18080}
BATCHWIRE=$BUILD/app/batchwire
BWLOAD=$BUILD/bench/bwload/bwload
MLP=$(realpath "$BUILD/models/mlp.onnx" 2>/dev/null)
[ "$(id -u)" -eq 0 ] || { echo "peer: needs root (DPDK without hugepages, memif)"; exit 77; }
for x in "$BATCHWIRE" "$BWLOAD" "$MLP"; do [ -e "$x" ] || { echo "peer: build first: $x"; exit 1; }; done
[ -x "$PEER_VENV/bin/mlserver" ] || { echo "peer: no MLServer in $PEER_VENV (see the usage above)"; exit 1; }
command -v wrk >/dev/null || { echo "peer: wrk is not installed (apt-get install -y wrk)"; exit 1; }
case "$BW_LAYOUT" in one | split) ;; *) echo "peer: BW_LAYOUT is one or split"; exit 2 ;; esac

WORK=$(mktemp -d /tmp/bw-peer.XXXXXX)
SERVER_PID=
stop_server() {
	[ -n "$SERVER_PID" ] || return 0
	kill -TERM "$SERVER_PID" 2>/dev/null
	for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
	kill -KILL "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=
}
cleanup() {
	stop_server
	rm -rf "$WORK" /var/run/dpdk/peer-$$-*
}
trap cleanup EXIT
# One thread for every BLAS and OpenMP pool, on both sides.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# ---- MLServer -----------------------------------------------------------------------------------
echo "== MLServer: the MLP on CPU $SERVER_CPU, adaptive batching 8 / 0.5 ms; wrk on CPU $GEN_CPU"
mkdir -p "$WORK/models"
cp "$HERE/mlserver/runtime.py" "$HERE/mlserver/model-settings.json" "$WORK/models/"
sed "s/\"http_port\": [0-9]*/\"http_port\": $HTTP_PORT/; s/\"grpc_port\": [0-9]*/\"grpc_port\": $((HTTP_PORT + 1))/; s/\"metrics_port\": [0-9]*/\"metrics_port\": $((HTTP_PORT + 2))/" \
	"$HERE/mlserver/settings.json" >"$WORK/models/settings.json"
ln -s "$MLP" "$WORK/models/mlp.onnx"
(cd "$WORK/models" && exec taskset -c "$SERVER_CPU" "$PEER_VENV/bin/mlserver" start .) >"$WORK/mlserver.log" 2>&1 &
SERVER_PID=$!
URL=http://127.0.0.1:$HTTP_PORT
for _ in $(seq 1 150); do
	curl -sf "$URL/v2/models/mlp/ready" >/dev/null 2>&1 && break
	kill -0 "$SERVER_PID" 2>/dev/null || break
	sleep 0.2
done
curl -sf "$URL/v2/models/mlp/ready" >/dev/null 2>&1 || { echo "peer: MLServer did not start: $(tail -n 5 "$WORK/mlserver.log")"; exit 1; }

# One reply checked against onnxruntime run directly on the same row, before any timing.
"$PEER_VENV/bin/python" - "$URL" "$MLP" "$HERE/kserve_v2_infer.lua" <<'PY' || exit 1
import json, re, sys, urllib.request
import numpy as np, onnxruntime as ort
url, model, lua = sys.argv[1:4]
state, row = 12345, []
for _ in range(784):  # the Lua script's generator
    state = (state * 1103515245 + 12345) % 2147483648
    row.append(float(f"{state / 1073741824 - 1:.6f}"))
body = json.dumps({"inputs": [{"name": "input", "shape": [1, 784], "datatype": "FP32", "data": row}]}).encode()
req = urllib.request.Request(f"{url}/v2/models/mlp/infer", body, {"Content-Type": "application/json"})
out = json.load(urllib.request.urlopen(req))["outputs"][0]
got = np.array(out["data"], dtype=np.float32).reshape(out["shape"])
opts = ort.SessionOptions(); opts.intra_op_num_threads = 1; opts.inter_op_num_threads = 1
want = ort.InferenceSession(model, opts).run(None, {"input": np.array([row], dtype=np.float32)})[0]
diff = float(np.max(np.abs(got - want)))
print(f"  reply {out['name']} {out['shape']} against onnxruntime on the same row: max |diff| {diff:.3g}")
sys.exit(0 if diff < 1e-4 else 1)
PY

peer_load() { # name connections seconds
	taskset -c "$GEN_CPU" wrk -t1 -c"$2" -d"$3"s --timeout 2s -s "$HERE/kserve_v2_infer.lua" "$URL" >"$WORK/$1.out" 2>&1 ||
		{ echo "wrk $1 failed: $(tail -n 3 "$WORK/$1.out")"; exit 1; }
	echo "  $1: $(grep '^wrk ' "$WORK/$1.out")"
}
peer_load peer-warmup 4 2
for c in $PEER_LEVELS; do peer_load "peer-c$c" "$c" "$SECONDS_RUN"; done
stop_server

# ---- batchwire ----------------------------------------------------------------------------------
if [ "$BW_LAYOUT" = one ]; then
	echo "== batchwire: the MLP, one lcore on CPU $SERVER_CPU polls and runs it; bwload on CPU $GEN_CPU"
	BW_CMD=(taskset -c "$SERVER_CPU" "$BATCHWIRE" -l "$SERVER_CPU")
	BW_POLL=()
	GEN_IDLE=0
else
	echo "== batchwire: the MLP, polling lcore on CPU $SERVER_CPU, worker on CPU $GEN_CPU (shared with bwload, --idle-us $IDLE_US)"
	BW_CMD=("$BATCHWIRE" -l "$GEN_CPU,$SERVER_CPU" --main-lcore "$GEN_CPU")
	BW_POLL=(--poll-lcores "$SERVER_CPU")
	GEN_IDLE=$IDLE_US
fi
"${BW_CMD[@]}" --no-huge -m 1024 --no-pci --file-prefix "peer-$$-bw" \
	--vdev "net_memif0,role=server,socket=$WORK/memif.sock" -- --ip 10.82.0.1 --mtu 1500 "${BW_POLL[@]}" \
	--model mlp="$MLP" --model-opt mlp.max_batch_size=8 --model-opt mlp.allowed_batch_sizes=1,2,4,8 \
	--model-opt mlp.batch_timeout_micros=500 --model-opt mlp.num_batch_threads=1 \
	--model-opt mlp.max_enqueued_batches=1000 >"$WORK/bw.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do grep -q "serving on" "$WORK/bw.log" && break; sleep 0.2; done
grep -q "serving on" "$WORK/bw.log" || { echo "peer: batchwire did not start: $(tail -n 3 "$WORK/bw.log")"; exit 1; }

bw_load() { # name outstanding seconds
	taskset -c "$GEN_CPU" "$BWLOAD" --no-huge -m 512 --no-pci --file-prefix "peer-$$-$1" -l "$GEN_CPU" \
		--vdev "net_memif0,role=client,socket=$WORK/memif.sock" -- --server 10.82.0.1 --ip 10.82.0.2 \
		--mix model=mlp --idle-us "$GEN_IDLE" --quiet --json "$WORK/$1.json" --closed "$2" --duration "$3" \
		>"$WORK/$1.out" 2>&1 || { echo "bwload $1 failed: $(tail -n 3 "$WORK/$1.out")"; exit 1; }
	echo "  $1: $(tail -n 1 "$WORK/$1.out")"
}
bw_load bw-warmup 4 2
for n in $BW_LEVELS; do bw_load "bw-c$n" "$n" "$SECONDS_RUN"; done
stop_server

# ---- summary ------------------------------------------------------------------------------------
"$PEER_VENV/bin/python" - "$WORK" "$PEER_LEVELS" "$BW_LEVELS" "$P99_LIMIT_US" "$BW_LAYOUT" "$SERVER_CPU" "$GEN_CPU" "$BATCHWIRE" <<'PY'
import json, subprocess, sys
from importlib.metadata import version
work, peer_levels, bw_levels, limit_us, layout, scpu, gcpu, batchwire = sys.argv[1:9]
limit_us = float(limit_us)
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
wrk_v = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("Copyright")[0].strip()
bw_v = subprocess.run([batchwire, "--version"], capture_output=True, text=True).stdout.strip()
print(f"cpu: {model}; server on CPU {scpu}, generator on CPU {gcpu}; batchwire layout {layout}")
print(f"versions: mlserver {version('mlserver')}, onnxruntime {version('onnxruntime')}, numpy {version('numpy')}, "
      f"uvloop {version('uvloop')}, python {sys.version.split()[0]}; {wrk_v}; {bw_v}")

def peer_row(c):
    line = next(l for l in open(f"{work}/peer-c{c}.out") if l.startswith("wrk "))
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    ok = int(f["non2xx"]) == 0 and int(f["socket_errors"]) == 0
    return float(f["rps"]), float(f["p50_us"]), float(f["p99_us"]), ok, f"non-2xx {f['non2xx']}, socket errors {f['socket_errors']}"

def bw_row(n):
    d = json.load(open(f"{work}/bw-c{n}.json"))
    c, lat = d["counts"], d["latency_us"]
    bad = c["sent"] - c["ok"]
    return c["ok"] / d["seconds"], lat["p50"], lat["p99"], bad == 0, f"{c['ok']} OK of {c['sent']}"

def table(name, levels, row, what):
    print(f"{name} ({what}):")
    rows = {}
    for lv in levels.split():
        rps, p50, p99, ok, note = rows[lv] = row(lv)
        print(f"  {lv:>3}: {rps:9,.0f} req/s  p50 {p50 / 1000:7.3f} ms  p99 {p99 / 1000:7.3f} ms  ({note})")
    good = [(v[0], lv) for lv, v in rows.items() if v[2] < limit_us and v[3]]
    best = max(good) if good else (0.0, "-")
    low = rows[levels.split()[0]]
    print(f"  highest rate with p99 < {limit_us / 1000:.0f} ms: {best[0]:,.0f} req/s (at {best[1]})")
    return low, best[0]

(pl, pmax) = table("MLServer, KServe v2 HTTP/JSON, wrk -t1", peer_levels, peer_row, "connections")
(bl, bmax) = table("batchwire, protocol v1 over memif, bwload", bw_levels, bw_row, "closed-loop outstanding")
print(f"low load p99: peer {pl[2] / 1000:.3f} ms, batchwire {bl[2] / 1000:.3f} ms")
win = lambda r: "batchwire" if r > 1 else "peer" if r < 1 else "neither"
r_lat = pl[1] / bl[1]
print(f"peer low_load_p50_ms={pl[1] / 1000:.3f} batchwire low_load_p50_ms={bl[1] / 1000:.3f} "
      f"ratio=peer/batchwire={r_lat:.2f} lower={win(r_lat)}")
r_max = bmax / pmax if pmax > 0 else float("inf")
print(f"peer max_rate_p99_lt_10ms={pmax:.0f} batchwire max_rate_p99_lt_10ms={bmax:.0f} "
      f"ratio=batchwire/peer={r_max:.2f} higher={win(r_max)}")
PY
