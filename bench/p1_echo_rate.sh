#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# P1: echo requests per second on one polling lcore, against dpdk-testpmd forwarding the same
# generator's datagrams on the same memif pair (docs/performance.md). One generator (bwload, open
# loop as fast as it can send, on lcore GEN_LCORE), two peers in turn on lcore PEER_LCORE:
#   1. batchwire serving echo (its polling lcore): replies per second;
#   2. testpmd in io forward mode (its forwarding lcore): the datagrams come straight back, counted
#      by bwload as frames per second (it has no reply to match them to).
# The ratio is the first over the second; it says how much of the forwarder's packet rate is left
# once each packet is parsed, batched, echoed and answered. Prints the ratio last.
#
# Usage (as root): bench/p1_echo_rate.sh [BUILD_DIR] [SECONDS] [ROWS]
set -u
BUILD=${1:-build}
SECONDS_RUN=${2:-5}
ROWS=${3:-1}
GEN_LCORE=${GEN_LCORE:-0}
PEER_LCORE=${PEER_LCORE:-1}
BATCHWIRE=$BUILD/app/batchwire
BWLOAD=$BUILD/bench/bwload/bwload
[ "$(id -u)" -eq 0 ] || { echo "p1: needs root (DPDK without hugepages, memif)"; exit 77; }
for x in "$BATCHWIRE" "$BWLOAD"; do [ -x "$x" ] || { echo "p1: build first: $x"; exit 1; }; done
command -v dpdk-testpmd >/dev/null || { echo "p1: dpdk-testpmd is not installed"; exit 77; }

WORK=$(mktemp -d /tmp/bw-p1.XXXXXX)
PEER_PID=
cleanup() {
	[ -n "$PEER_PID" ] && kill -INT "$PEER_PID" 2>/dev/null && wait "$PEER_PID" 2>/dev/null
	[ -n "$KEEP" ] || rm -rf "$WORK"; rm -rf /var/run/dpdk/p1-$$-*
}
trap cleanup EXIT
KEEP=${KEEP:-}
MAC=02:00:00:00:00:01 # the peer's memif MAC, given to both peers so bwload needs no ARP from testpmd

generate() { # name: bwload open loop, as fast as it goes, on its own lcore
	"$BWLOAD" --no-huge -m 512 --no-pci --file-prefix "p1-$$-gen-$1" -l "$GEN_LCORE" \
		--vdev "net_memif0,role=client,socket=$WORK/memif.sock" -- --server 10.80.0.1 --ip 10.80.0.2 \
		--server-mac "$MAC" --no-model-info --mix "model=0,rows=$ROWS" --rate 50000000 --duration "$SECONDS_RUN" \
		--timeout-ms 10 --no-udp-csum --quiet --json "$WORK/$1.json" >"$WORK/$1.out" 2>"$WORK/$1.err"
}

echo "== batchwire serving echo on lcore $PEER_LCORE"
"$BATCHWIRE" --no-huge -m 1024 --no-pci --file-prefix "p1-$$-bw" -l "$GEN_LCORE,$PEER_LCORE" \
	--vdev "net_memif0,role=server,socket=$WORK/memif.sock,mac=$MAC" -- --ip 10.80.0.1 --mtu 1500 \
	--poll-lcores "$PEER_LCORE" --model-opt echo.max_batch_size=32 --model-opt echo.batch_timeout_micros=0 \
	>"$WORK/bw.log" 2>&1 &
PEER_PID=$!
for _ in $(seq 1 100); do grep -q "serving on" "$WORK/bw.log" && break; sleep 0.2; done
grep -q "serving on" "$WORK/bw.log" || { echo "p1: batchwire did not start: $(tail -n 3 "$WORK/bw.log")"; exit 1; }
generate batchwire
kill -INT "$PEER_PID"; wait "$PEER_PID"; PEER_PID=
tail -n 3 "$WORK/batchwire.out" | sed 's/^/  /'

echo "== dpdk-testpmd io forward on lcore $PEER_LCORE"
dpdk-testpmd --no-huge -m 1024 --no-pci --file-prefix "p1-$$-pmd" -l "$GEN_LCORE,$PEER_LCORE" \
	--vdev "net_memif0,role=server,socket=$WORK/memif.sock,mac=$MAC" -- --forward-mode=io --nb-cores=1 \
	--total-num-mbufs=16384 --auto-start --stats-period 1 </dev/null >"$WORK/pmd.log" 2>&1 &
PEER_PID=$!
sleep 3
generate testpmd
kill -INT "$PEER_PID"; wait "$PEER_PID" 2>/dev/null; PEER_PID=
tail -n 2 "$WORK/testpmd.out" | sed 's/^/  /'

python3 - "$WORK" "$ROWS" <<'PY'
import json, re, subprocess, sys
work, rows = sys.argv[1], int(sys.argv[2])
bw = json.load(open(f"{work}/batchwire.json"))
pmd = json.load(open(f"{work}/testpmd.json"))
foreign = int(re.search(r"(\d+) foreign frames", open(f"{work}/testpmd.out").read()).group(1))
# every reply that came back, late ones included: open loop past saturation times the others out
bw_rate = bw["counts"]["datagrams_in"] / bw["seconds"]
pmd_rate = foreign / pmd["seconds"]
sent_bw, sent_pmd = bw["counts"]["sent"] / bw["seconds"], pmd["counts"]["sent"] / pmd["seconds"]
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
print(f"cpu: {model}")
print(f"batchwire echo: {bw_rate:,.0f} replies/s (offered {sent_bw:,.0f}/s)")
print(f"testpmd io fwd: {pmd_rate:,.0f} frames/s back (offered {sent_pmd:,.0f}/s)")
print(f"p1 rows={rows} echo_rps={bw_rate:.0f} testpmd_pps={pmd_rate:.0f}")
print(f"echo_rps / testpmd_pps = {bw_rate / pmd_rate:.3f}")
PY
