#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bwload against batchwire over a memif pair (two DPDK processes, a unix socket between them; no
# namespaces): a few seconds at small rates, no timing assertions.
#   - open loop, echo and the MLP mixed: every request OK, bwload's conservation line holds, and the
#     server's counters agree with it (replies by status, datagrams);
#   - closed loop with segmented requests (MTU 1500: 2 MLP rows, 6 KB, in 5 datagrams);
#   - overload: the MLP behind a one-batch queue, offered far more than it holds: the server rejects
#     at once (UNAVAILABLE) and its count of rejects equals bwload's count of UNAVAILABLE replies;
#     every request is accounted for on both sides.
#
# Usage (as root): bwload_memif.sh BATCHWIRE BWLOAD MODELS_DIR
set -u
BATCHWIRE=$1
BWLOAD=$2
MODELS=$3
SERVER_IP=10.79.0.1
CLIENT_IP=10.79.0.2

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -f "$WORK/server.log" ] && tail -n 20 "$WORK/server.log"; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "needs root (DPDK without hugepages, memif's socket)"
[ -f "$MODELS/mlp.onnx" ] || skip "$MODELS/mlp.onnx is missing (the models/ targets need python3 with onnx and numpy)"
command -v dpdk-telemetry.py >/dev/null || skip "dpdk-telemetry.py is not installed"

WORK=$(mktemp -d /tmp/bw-bwload.XXXXXX)
SOCK=$WORK/memif.sock
PREFIX=bwload-srv-$$
SERVER_PID=
cleanup() {
	local rc=$?
	[ -n "$SERVER_PID" ] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	rm -rf "$WORK" "/var/run/dpdk/$PREFIX" /var/run/dpdk/bwload-cli-$$-*
	exit "$rc"
}
trap cleanup EXIT

stats() {
	echo /batchwire/stats | dpdk-telemetry.py -f "$PREFIX" 2>/dev/null | grep -F '"/batchwire/stats"' | tail -n 1
}
model_stats() {
	echo "/batchwire/model,$1" | dpdk-telemetry.py -f "$PREFIX" 2>/dev/null | grep -F '"/batchwire/model"' | tail -n 1
}

# server_start [app options...]
server_start() {
	OPENBLAS_NUM_THREADS=1 "$BATCHWIRE" --no-huge -m 1024 --no-pci --file-prefix "$PREFIX" -l 0-1 \
		--vdev "net_memif0,role=server,socket=$SOCK" -- --ip "$SERVER_IP" --mtu 1500 "$@" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		grep -q "serving on" "$WORK/server.log" && return 0
		kill -0 "$SERVER_PID" 2>/dev/null || fail "batchwire exited during start-up"
		sleep 0.2
	done
	fail "batchwire did not start within 20 s"
}
server_stop() {
	kill -TERM "$SERVER_PID"
	wait "$SERVER_PID" || fail "batchwire exited $? after SIGTERM"
	SERVER_PID=
}

# load NAME [bwload options...]: one bwload run on its own file prefix; its output in $WORK/NAME.*
load() {
	local name=$1
	shift
	"$BWLOAD" --no-huge -m 512 --no-pci --file-prefix "bwload-cli-$$-$name" -l 0 \
		--vdev "net_memif0,role=client,socket=$SOCK" -- --server "$SERVER_IP" --ip "$CLIENT_IP" \
		--json "$WORK/$name.json" --quiet "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
	local rc=$?
	echo "  $name: $(tail -n 1 "$WORK/$name.out")"
	return $rc
}

# agree NAME BEFORE AFTER [MODEL_BEFORE MODEL_AFTER]: bwload's JSON against the server's counters
agree() {
	python3 - "$WORK" "$@" <<'PY'
import json, sys
work, name, before, after = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
run = json.load(open(f"{work}/{name}.json"))
b = json.load(open(before))["/batchwire/stats"]
a = json.load(open(after))["/batchwire/stats"]
ok = True
def check(what, got, want):
    global ok
    print(f"    {what}: {got} (expected {want})")
    ok &= got == want
c = run["counts"]
setup = run["conf"]  # its MODEL_INFO requests at start-up (OK replies), outside its counts
check("bwload conserved", run["conserved"], True)
check("server OK replies = bwload OK + its MODEL_INFO replies",
      a["replies_by_status"]["OK"] - b["replies_by_status"]["OK"], c["ok"] + setup["setup_replies"])
for status, n in run["errors_by_status"].items():
    check(f"server {status} replies = bwload's", a["replies_by_status"][status] - b["replies_by_status"][status], n)
check("server datagrams in = bwload's (MODEL_INFO included)", a["requests"] - b["requests"],
      c["datagrams_out"] + setup["setup_datagrams_out"])
check("nothing held at the end", (a["reasm_messages"], a["held_messages"], a["held_mbufs"]), (0, 0, 0))
check("every mbuf back in the pool", a["mbufs_free"], b["mbufs_free"])
if len(sys.argv) > 6:
    mb, ma = json.load(open(sys.argv[5]))["/batchwire/model"], json.load(open(sys.argv[6]))["/batchwire/model"]
    rejected = ma["rejected_full"] - mb["rejected_full"]
    check("server rejects (queue full) = bwload UNAVAILABLE", rejected, run["errors_by_status"]["UNAVAILABLE"])
    check("model: accepted = answered", ma["requests"], ma["requests_done"])
    print(f"    overload: {c['ok']} OK, {rejected} rejected at once of {c['sent']} sent")
    ok &= rejected > 0
sys.exit(0 if ok else 1)
PY
}

echo "== batchwire on memif: echo and the MLP"
server_start --model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8 --model-opt mlp.allowed_batch_sizes=1,2,4,8 \
	--model-opt mlp.batch_timeout_micros=200
stats >"$WORK/s0.json"
load open --mix "model=echo,weight=3;model=mlp" --rate 400 --count 1200 || fail "open loop: bwload exited $?"
stats >"$WORK/s1.json"
grep -q "sent=1200 ok=1200 errors=0 timeouts=0" "$WORK/open.out" || fail "open loop: expected 1200 OK: $(tail -n 1 "$WORK/open.out")"
agree open "$WORK/s0.json" "$WORK/s1.json" || fail "open loop: bwload and the server disagree"

load closed --mix "model=mlp,rows=2" --closed 4 --count 600 || fail "closed loop: bwload exited $?"
stats >"$WORK/s2.json"
grep -q "sent=600 ok=600 errors=0 timeouts=0" "$WORK/closed.out" || fail "closed loop: $(tail -n 1 "$WORK/closed.out")"
grep -q "5 datagrams each" "$WORK/closed.out" || fail "closed loop: the MLP's requests were not segmented"
agree closed "$WORK/s1.json" "$WORK/s2.json" || fail "closed loop: bwload and the server disagree"
server_stop

echo "== overload: the MLP behind a queue of one batch"
server_start --model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=1 --model-opt mlp.max_enqueued_batches=1 \
	--model-opt mlp.num_batch_threads=1 --model-opt mlp.batch_timeout_micros=0
stats >"$WORK/o0.json"
model_stats mlp >"$WORK/m0.json"
load overload --mix "model=mlp,deadline_us=50000" --rate 20000 --count 20000 --timeout-ms 2000 ||
	fail "overload: bwload exited $?"
grep "^deadlines:" "$WORK/overload.out" | sed 's/^/    /' # reported, not asserted: it is a time
stats >"$WORK/o1.json"
model_stats mlp >"$WORK/m1.json"
agree overload "$WORK/o0.json" "$WORK/o1.json" "$WORK/m0.json" "$WORK/m1.json" || fail "overload: counts disagree"
server_stop
echo "PASS"
