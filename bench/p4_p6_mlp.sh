#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# P6 and P4 on the MLP served by the CPU backend over memif (docs/performance.md), bwload as the
# generator:
#   P6  end-to-end throughput (closed loop, enough outstanding to fill every batch of BATCH) against
#       bwrun's offline throughput at the same batch size and worker count (one worker);
#   P4  open loop (Poisson) at 80% of that measured maximum: p50/p99/p99.9 against the bound
#       batch_timeout_micros + the model's p99 compute time at BATCH (bwrun's) + 50 us; then a search
#       of 10..70% for the highest rate whose p99 stays flat (no error, p99 within twice the
#       lowest rate's), and P4 there too.
# Lcores: batchwire polls on POLL_LCORE, its worker is the main lcore (MAIN_LCORE); bwload runs on
# GEN_LCORE. On a 2-core host GEN_LCORE shares a core with the worker: bwload then sleeps --idle-us
# whenever it has nothing to do, and that sharing bounds both figures (said in the output).
# LAYOUT=one gives batchwire a single lcore (POLL_LCORE) that polls and runs the worker: the
# generator then has the other core to itself.
# Prints the two ratios last.
#
# Usage (as root): bench/p4_p6_mlp.sh [BUILD_DIR] [SECONDS]
set -u
BUILD=${1:-build}
SECONDS_RUN=${2:-10}
BATCH=${BATCH:-8}
ALLOWED=${ALLOWED:-1,2,4,8}  # padded sizes up to BATCH: an open loop forms small batches
TIMEOUT_US=${TIMEOUT_US:-500}
MAIN_LCORE=${MAIN_LCORE:-0}
POLL_LCORE=${POLL_LCORE:-1}
GEN_LCORE=${GEN_LCORE:-0}
IDLE_US=${IDLE_US:-20}
LAYOUT=${LAYOUT:-split}  # split: polling lcore POLL_LCORE, worker MAIN_LCORE; one: POLL_LCORE does both
BATCHWIRE=$BUILD/app/batchwire
BWLOAD=$BUILD/bench/bwload/bwload
BWRUN=$BUILD/app/bwrun
MLP=$BUILD/models/mlp.onnx
[ "$(id -u)" -eq 0 ] || { echo "p4/p6: needs root (DPDK without hugepages, memif)"; exit 77; }
for x in "$BATCHWIRE" "$BWLOAD" "$BWRUN" "$MLP"; do [ -e "$x" ] || { echo "p4/p6: build first: $x"; exit 1; }; done

WORK=$(mktemp -d /tmp/bw-p46.XXXXXX)
SERVER_PID=
cleanup() {
	[ -n "$SERVER_PID" ] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	rm -rf "$WORK" /var/run/dpdk/p46-$$-*
}
trap cleanup EXIT
export OPENBLAS_NUM_THREADS=1

echo "== bwrun offline: the MLP at batch $BATCH, one worker"
"$BWRUN" --batch "$BATCH" --warmup 100 --repeat 2000 "$MLP" >"$WORK/bwrun.log" 2>&1 || { tail -n 3 "$WORK/bwrun.log"; exit 1; }
tail -n 1 "$WORK/bwrun.log" | sed 's/^/  /'

echo "== batchwire: the MLP, batches of $BATCH, batch_timeout_micros $TIMEOUT_US"
if [ "$LAYOUT" = one ]; then
	# one lcore that polls and runs the worker (the main lcore polls when it is the only one)
	BW_LCORES=(-l "$POLL_LCORE")
	BW_POLL=()
else
	BW_LCORES=(-l "$MAIN_LCORE,$POLL_LCORE" --main-lcore "$MAIN_LCORE")
	BW_POLL=(--poll-lcores "$POLL_LCORE")
fi
"$BATCHWIRE" --no-huge -m 1024 --no-pci --file-prefix "p46-$$-bw" "${BW_LCORES[@]}" \
	--vdev "net_memif0,role=server,socket=$WORK/memif.sock" -- --ip 10.81.0.1 --mtu 1500 "${BW_POLL[@]}" \
	--model mlp="$MLP" --model-opt mlp.max_batch_size="$BATCH" --model-opt mlp.allowed_batch_sizes="$ALLOWED" \
	--model-opt mlp.batch_timeout_micros="$TIMEOUT_US" --model-opt mlp.num_batch_threads=1 \
	--model-opt mlp.max_enqueued_batches=1000 >"$WORK/bw.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do grep -q "serving on" "$WORK/bw.log" && break; sleep 0.2; done
grep -q "serving on" "$WORK/bw.log" || { echo "p4/p6: batchwire did not start: $(tail -n 3 "$WORK/bw.log")"; exit 1; }

load() { # name [bwload options...]
	local name=$1
	shift
	"$BWLOAD" --no-huge -m 512 --no-pci --file-prefix "p46-$$-$name" -l "$GEN_LCORE" \
		--vdev "net_memif0,role=client,socket=$WORK/memif.sock" -- --server 10.81.0.1 --ip 10.81.0.2 \
		--mix model=mlp --idle-us "$IDLE_US" --quiet --json "$WORK/$name.json" "$@" >"$WORK/$name.out" 2>&1 ||
		{ echo "bwload $name failed: $(tail -n 3 "$WORK/$name.out")"; exit 1; }
	echo "  $name: $(tail -n 1 "$WORK/$name.out")"
	grep "^errors:" "$WORK/$name.out" | sed "s/^/    /"
}
echo "== P6: closed loop, $((4 * BATCH)) outstanding, $SECONDS_RUN s"
load warmup --closed $((4 * BATCH)) --duration 2
load closed --closed $((4 * BATCH)) --duration "$SECONDS_RUN"
MAX=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["counts"]["ok"] / d["seconds"])' "$WORK/closed.json")
RATE=$(python3 -c "print($MAX * 0.8)")
echo "== P4: open loop, Poisson at 80% of $MAX/s = $RATE/s, $SECONDS_RUN s"
load open --poisson "$RATE" --duration "$SECONDS_RUN" --timeout-ms 1000
echo "== P4 search: Poisson at 10..80% of $MAX/s, 5 s each: the highest rate whose p99 stays flat"
for pct in 10 20 30 40 50 60 70; do
	load "open_$pct" --poisson "$(python3 -c "print($MAX * $pct / 100)")" --duration 5 --timeout-ms 1000
done
kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; SERVER_PID=

python3 - "$WORK" "$BATCH" "$TIMEOUT_US" "$IDLE_US" <<'PY'
import json, re, subprocess, sys
work, batch, timeout_us, idle_us = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
line = open(f"{work}/bwrun.log").read().strip().splitlines()[-1]
f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
mean_us, p99_us = float(f["mean_us"]), float(f["p99_us"])
offline = batch * 1e6 / mean_us
closed = json.load(open(f"{work}/closed.json"))
e2e = closed["counts"]["ok"] / closed["seconds"]
op = json.load(open(f"{work}/open.json"))
lat = op["latency_us"]
bound = timeout_us + p99_us + 50
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
print(f"cpu: {model}; bwload --idle-us {idle_us}")
print(f"bwrun offline, batch {batch}: mean {mean_us:.1f} us, p99 {p99_us:.1f} us: {offline:,.0f} rows/s")
print(f"P6 closed loop: {e2e:,.0f} requests/s end to end ({closed['counts']['sent']} sent, {closed['counts']['ok']} OK)")
print(f"P4 open loop at {op['counts']['sent'] / op['seconds']:,.0f}/s: p50 {lat['p50']:.1f} us, p99 {lat['p99']:.1f} us, "
      f"p99.9 {lat['p99.9']:.1f} us, max {lat['max']:.1f} us (OK {op['counts']['ok']} of {op['counts']['sent']}, "
      f"timeouts {op['counts']['timeouts']})")
print(f"P4 bound: batch_timeout_micros {timeout_us:.0f} + p99 compute {p99_us:.1f} + 50 = {bound:.1f} us: "
      f"{'met' if lat['p99.9'] <= bound else 'missed'}")
# the search: flat = no error and p99 within twice the lowest rate's
runs = []
for pct in (10, 20, 30, 40, 50, 60, 70):
    d = json.load(open(f"{work}/open_{pct}.json"))
    runs.append((pct, d["counts"]["sent"] / d["seconds"], d["latency_us"], d["counts"]))
base = runs[0][2]["p99"]
flat = [r for r in runs if r[3]["ok"] == r[3]["sent"] and r[2]["p99"] <= 2 * base]
for pct, rate, l, c in runs:
    print(f"  {pct:3d}%: {rate:8,.0f}/s  p50 {l['p50']:9.1f}  p99 {l['p99']:9.1f}  p99.9 {l['p99.9']:9.1f} us"
          f"  OK {c['ok']} of {c['sent']}")
if flat:
    pct, rate, l, c = flat[-1]
    print(f"P4 at the highest flat rate, {pct}% ({rate:,.0f}/s): p99.9 {l['p99.9']:.1f} us against {bound:.1f} us: "
          f"{'met' if l['p99.9'] <= bound else 'missed'}")
    flat_p999 = l["p99.9"]
else:
    print("P4: no rate in the search stayed flat")
    flat_p999 = float("nan")
print(f"p46 batch={batch} offline_rps={offline:.0f} e2e_rps={e2e:.0f} p4_p999_us={lat['p99.9']:.1f} "
      f"p4_flat_p999_us={flat_p999:.1f} p4_bound_us={bound:.1f}")
print(f"e2e_rps / offline_rps = {e2e / offline:.3f}")
print(f"p4_p999_us / p4_bound_us = {lat['p99.9'] / bound:.3f}  (at 80%; at the highest flat rate: {flat_p999 / bound:.3f})")
PY
