#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# P3: system calls and heap calls per request on batchwire's polling lcore and its CPU worker (the
# main lcore) during a window of steady load; a benchmark that prints figures, not a test.
#
#   - memif: batchwire and bwload, two DPDK processes joined by a memif pair (as
#     tests/integration/bwload_memif.sh starts them);
#   - af_packet: batchwire on net_af_packet at one end of a veth pair between two namespaces (as
#     tests/integration/netns.sh sets them up), bwload on a kernel UDP socket at the other.
#
# For each: batchwire (echo and the MLP, MTU 1500: an MLP request is 3 datagrams) runs under
# LD_PRELOAD=libheapcount.so, bwload offers an open loop at $P3_RATE requests/s, and after
# $P3_WARMUP_S s of load the script copies the heap table, runs `strace -c` attached to the polling
# lcore's thread(s) and, beside it, one attached to the main thread (the worker) for $P3_WINDOW_S s,
# copies the heap table again and divides every delta by the replies batchwire sent in the window
# (its /batchwire/stats, read just before and just after: their rate times the window). Only those
# threads are counted: not telemetry, eal-intr-thread or rte_mp_handle. A group with system calls in the
# window then gets a short `strace -k` pass, whose stacks say where each call comes from; on
# af_packet those stacks also split the polling lcore's calls into the PMD's (frames in
# librte_net_af_packet) and the rest.
#
# Usage (as root): bench/p3_syscalls.sh [BUILD_DIR [MODELS_DIR]]
#   BUILD_DIR (default build/) holds app/batchwire, bench/bwload/bwload and bench/libheapcount.so;
#   MODELS_DIR (default BUILD_DIR/models) holds mlp.onnx. Environment: P3_RATE (2000),
#   P3_WINDOW_S (10), P3_WARMUP_S (2), P3_STACK_S (2, the strace -k pass), P3_PARTS ("memif af_packet"),
#   P3_KEEP (1: keep the raw files).
# Last lines:
#   p3 memif polling_syscalls_per_req=X worker_syscalls_per_req=X polling_heap_per_req=X worker_heap_per_req=X
#   p3 af_packet polling_syscalls_per_req=X pmd_syscalls_per_req=X other_syscalls_per_req=X worker_syscalls_per_req=X ...
# Exit status: 0 when every part ran; 77 (meson's SKIP) with the reason when it cannot run here.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(dirname "$HERE")
BUILD=${1:-$SRC/build}
MODELS=${2:-$BUILD/models}
BATCHWIRE=$BUILD/app/batchwire
BWLOAD=$BUILD/bench/bwload/bwload
HEAPCOUNT=$BUILD/bench/libheapcount.so
RATE=${P3_RATE:-2000}
WINDOW_S=${P3_WINDOW_S:-10}
WARMUP_S=${P3_WARMUP_S:-2}
STACK_S=${P3_STACK_S:-2}
PARTS=${P3_PARTS:-memif af_packet}
MIX="model=echo;model=mlp"
# shellcheck disable=SC2054 # the commas are inside one option value
MODEL_ARGS=(--model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8
	--model-opt mlp.allowed_batch_sizes=1,2,4,8 --model-opt mlp.batch_timeout_micros=200)
# bwload outlasts the window: start-up, warm-up, the window, the stack pass and a margin
LOAD_S=$((WARMUP_S + WINDOW_S + STACK_S + 8))

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "p3: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (DPDK without hugepages, namespaces, ptrace)"
for tool in strace timeout python3 dpdk-telemetry.py; do
	command -v "$tool" >/dev/null || skip "$tool is not installed"
done
for f in "$BATCHWIRE" "$BWLOAD" "$HEAPCOUNT"; do
	[ -x "$f" ] || [ -f "$f" ] || skip "$f is missing (build it: ninja -C $BUILD app/batchwire bench/bwload/bwload bench/libheapcount.so)"
done
[ -f "$MODELS/mlp.onnx" ] || skip "$MODELS/mlp.onnx is missing"
strace -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace refused)"

TOP=$(mktemp -d /tmp/bw-p3.XXXXXX)
RESULTS=$TOP/results
: >"$RESULTS"
# P3_KEEP=1 keeps the raw files (strace output, heap tables, telemetry replies) and says where
if [ "${P3_KEEP:-0}" = 1 ]; then
	trap 'echo "p3: raw files in $TOP"' EXIT
else
	trap 'rm -rf "$TOP"' EXIT
fi

# ---- readers ----------------------------------------------------------------------------------------

# stats_to FILE PREFIX: one /batchwire/stats reply, with the time it was read
stats_to() {
	date +%s.%N >"$1.t"
	echo /batchwire/stats | dpdk-telemetry.py -f "$2" 2>/dev/null | grep -F '"/batchwire/stats"' | tail -n 1 >"$1"
}

# threads PID: every thread of PID with its name
threads() {
	for t in /proc/"$1"/task/*; do
		printf '%s %s\n' "${t##*/}" "$(cat "$t/comm" 2>/dev/null)"
	done
}

# strace_table NAME FILE: strace -c's table, indented, under a title
strace_table() {
	echo "  strace -c, $1:"
	if [ -s "$2" ]; then
		sed 's/^/    /' "$2"
	else
		echo "    (no system calls)"
	fi
}

# heapcount's table (bench/heapcount.c): header, names, then fixed slots. report PID BEFORE AFTER
# REPLIES GROUP=TID,TID... prints each thread's heap calls in the window and one `heap GROUP=N`
# line per group (calls, bytes excluded).
heap_report() {
	python3 - "$@" <<'PY'
import struct, sys
pid, before, after, replies = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
groups = [g.split("=", 1) for g in sys.argv[5:]]

def load(path):
    b = open(path, "rb").read()
    magic, ver, nslots, nc, slot_bytes, off, name_bytes, used, hpid = struct.unpack_from("<8s7Ii", b, 0)
    if magic.rstrip(b"\0") != b"BWHEAP1":
        sys.exit(f"{path}: not a heapcount table")
    names = [b[64 + i * name_bytes:64 + (i + 1) * name_bytes].split(b"\0")[0].decode() for i in range(nc)]
    slots = {}
    for i in range(min(used, nslots)):
        o = off + i * slot_bytes
        tid, _, comm = struct.unpack_from("<iI16s", b, o)
        counts = struct.unpack_from(f"<{nc}Q", b, o + 24)
        slots[i] = (tid, comm.split(b"\0")[0].decode(errors="replace"), counts)
    return names, slots

names, s0 = load(before)
_, s1 = load(after)
calls = [i for i, n in enumerate(names) if n != "libc_bytes"]
nbytes = names.index("libc_bytes")
def live(tid, stored):
    try:
        return open(f"/proc/{pid}/task/{tid}/comm").read().strip()
    except OSError:
        return stored + " (exited)"
per_tid = {}
print(f"  heap calls in the window, per thread (calls; libc bytes asked):")
for i, (tid, comm, c1) in sorted(s1.items()):
    c0 = s0.get(i, (tid, comm, [0] * len(c1)))[2]
    d = [a - b for a, b in zip(c1, c0)]
    total = sum(d[k] for k in calls)
    per_tid[tid] = (total, d)
    if total == 0:
        continue
    what = ", ".join(f"{names[k]} {d[k]}" for k in calls if d[k])
    label = live(tid, comm) if tid else comm
    print(f"    tid {tid:>7} {label:<16} {total:>9}  ({what}; {d[nbytes]} bytes)")
if all(t == 0 for t, _ in per_tid.values()):
    print("    none, in any thread")
since = {tid: sum(c[k] for k in calls) for tid, _, c in s1.values()}
for name, tids in groups:
    for t in tids.split(","):
        t = int(t)
        if t in since:
            print(f"    {name} tid {t}: {per_tid[t][0]} in the window, {since[t]} since start-up")
        else:
            print(f"    {name} tid {t}: no heap call since start-up (no slot)")
for name, tids in groups:
    n = sum(per_tid.get(int(t), (0,))[0] for t in tids.split(","))
    print(f"heap {name}={n}")
PY
}

# strace_total FILE: the calls column of strace -c's total line (0 when it traced none)
strace_total() {
	awk '$NF == "total" && NF >= 5 { n = $4 } END { print n + 0 }' "$1"
}

# stack_report FILE: strace -k's log summarised: calls by name, split by whether a frame is the
# af_packet PMD's, and the distinct stacks (innermost frames first, trimmed)
stack_report() {
	python3 - "$1" <<'PY'
import collections, re, sys
calls = []
cur = None
for line in open(sys.argv[1], errors="replace"):
    if line.startswith(" > "):
        if cur is not None:
            cur[1].append(line[3:].strip())
        continue
    m = re.match(r"^(?:\d+\s+)?([a-z_0-9]+)\(", line)
    if m:
        cur = (m.group(1), [])
        calls.append(cur)
    else:
        cur = None
by = collections.Counter()
stacks = collections.Counter()
for name, frames in calls:
    pmd = any("librte_net_af_packet" in f for f in frames)
    by[(name, pmd)] += 1
    short = []
    for f in frames[:12]:
        f = re.sub(r"\s*\[0x[0-9a-f]+\]$", "", f)
        f = re.sub(r"^/\S*/", "", f)
        short.append(f)
        # past the lcore's entry the frames are EAL's thread start (static, misnamed): cut there
        if re.search(r"\((poll_lcore_main|worker_lcore_main|main)\+", f):
            break
    stacks[(name, " <- ".join(short))] += 1
print(f"  strace -k: {len(calls)} calls")
for (name, pmd), n in sorted(by.items()):
    print(f"    {name:<16} {n:>8}  {'af_packet PMD' if pmd else 'not the PMD'}")
for (name, st), n in stacks.most_common(8):
    print(f"    {n:>8} {name}: {st}")
for (name, pmd), n in sorted(by.items()):
    print(f"stackname {name} {'pmd' if pmd else 'other'} {n}")
PY
}

# ---- one window ------------------------------------------------------------------------------------

# measure PART PID PREFIX POLL_TIDS(comma) WORKER_TID: the window, then the figures.
# A control shows that both counters see what happens in the window: halfway through, one telemetry
# request, whose listener thread (telemetry-v2, traced by a third strace) accepts it and whose
# handler thread allocates its reply. Halfway through too, each traced thread's TracerPid says
# whether strace is attached to it.
measure() {
	local part=$1 pid=$2 prefix=$3 poll_tids=$4 worker_tid=$5
	local w=$TOP/$part
	local poll_args=()
	local t tele

	for t in ${poll_tids//,/ }; do poll_args+=(-p "$t"); done
	tele=$(threads "$pid" | awk '$2 == "telemetry-v2" { print $1; exit }')
	stats_to "$w/s0.json" "$prefix"
	cp "/dev/shm/bwheap-$pid" "$w/h0"
	timeout -s INT "$WINDOW_S" strace -c -o "$w/poll.strace" "${poll_args[@]}" 2>"$w/poll.strace.err" &
	local s1=$!
	timeout -s INT "$WINDOW_S" strace -c -o "$w/worker.strace" -p "$worker_tid" 2>"$w/worker.strace.err" &
	local s2=$!
	local s3=
	if [ -n "$tele" ]; then
		timeout -s INT "$WINDOW_S" strace -c -o "$w/control.strace" -p "$tele" 2>"$w/control.strace.err" &
		s3=$!
	fi
	sleep "$((WINDOW_S / 2))"
	: >"$w/tracers"
	for t in ${poll_tids//,/ } "$worker_tid"; do
		echo "$t $(awk '/^TracerPid:/ { print $2 }' "/proc/$pid/task/$t/status")" >>"$w/tracers"
	done
	echo /batchwire/lcores | dpdk-telemetry.py -f "$prefix" >/dev/null 2>&1
	wait "$s1" "$s2" $s3
	cp "/dev/shm/bwheap-$pid" "$w/h1"
	stats_to "$w/s1.json" "$prefix"
	if [ ! -s "$w/s0.json" ] || [ ! -s "$w/s1.json" ]; then
		die "$part: no /batchwire/stats reply"
	fi
	local untraced
	untraced=$(awk '$2 == 0 || $2 == "" { print $1 }' "$w/tracers")
	[ -z "$untraced" ] || die "$part: strace was not attached to thread(s) $untraced halfway through"

	# The replies of the strace window: the rate between the two stats readings (which bracket it, a
	# python start-up before and after) times the window.
	read -r replies_read datagrams window_s replies < <(python3 - "$w/s0.json" "$w/s1.json" "$WINDOW_S" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["/batchwire/stats"]
b = json.load(open(sys.argv[2]))["/batchwire/stats"]
ta, tb = (float(open(p + ".t").read()) for p in sys.argv[1:3])
r = b["replies"] - a["replies"]
print(r, b["requests"] - a["requests"], f"{tb - ta:.2f}", round(r * float(sys.argv[3]) / (tb - ta)))
PY
)
	[ "${replies:-0}" -gt 0 ] || die "$part: no replies in the window (is bwload sending?)"
	local poll_calls worker_calls
	poll_calls=$(strace_total "$w/poll.strace")
	worker_calls=$(strace_total "$w/worker.strace")

	echo "== $part: strace window ${WINDOW_S} s; stats ${window_s} s apart: $replies_read replies," \
		"$datagrams datagrams in; replies in the window: $replies"
	echo "  polling lcore thread(s) $poll_tids, worker (main) thread $worker_tid; strace attached halfway" \
		"(tid TracerPid): $(tr '\n' ' ' <"$w/tracers")"
	strace_table "polling lcore (tids $poll_tids)" "$w/poll.strace"
	strace_table "worker (tid $worker_tid)" "$w/worker.strace"
	if [ -n "$tele" ]; then
		strace_table "control: telemetry listener (tid $tele, not counted; one request halfway)" \
			"$w/control.strace"
	fi
	heap_report "$pid" "$w/h0" "$w/h1" "$replies" "polling=$poll_tids" "worker=$worker_tid" >"$w/heap.out"
	grep -v '^heap ' "$w/heap.out"
	local poll_heap worker_heap
	poll_heap=$(sed -n 's/^heap polling=\([0-9]*\).*/\1/p' "$w/heap.out")
	worker_heap=$(sed -n 's/^heap worker=\([0-9]*\).*/\1/p' "$w/heap.out")

	# where the calls come from: a short pass with stacks on each group that made any
	local pmd_calls=0 other_calls=$poll_calls
	if [ "$poll_calls" -gt 0 ]; then
		timeout -s INT "$STACK_S" strace -k -qq -o "$w/poll.k" "${poll_args[@]}" 2>/dev/null
		stack_report "$w/poll.k" >"$w/poll.k.out"
		echo "  polling lcore, ${STACK_S} s with stacks:"
		grep -v '^stackname ' "$w/poll.k.out"
		# the -c counts of the window, split by the names the stack pass saw as the PMD's
		read -r pmd_calls other_calls < <(python3 - "$w/poll.strace" "$w/poll.k.out" <<'PY'
import collections, sys
counts = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        counts[f[-1]] = int(f[3])
seen = collections.defaultdict(lambda: [0, 0])
for line in open(sys.argv[2]):
    if line.startswith("stackname "):
        _, name, kind, n = line.split()
        seen[name][0 if kind == "pmd" else 1] += int(n)
pmd = other = 0.0
for name, n in counts.items():
    p, o = seen.get(name, (0, 1))
    share = p / (p + o) if p + o else 0.0  # a name the stack pass missed counts as not the PMD's
    pmd += n * share
    other += n * (1 - share)
print(round(pmd), round(other))
PY
)
	fi
	if [ "$worker_calls" -gt 0 ]; then
		timeout -s INT "$STACK_S" strace -k -qq -o "$w/worker.k" -p "$worker_tid" 2>/dev/null
		echo "  worker, ${STACK_S} s with stacks:"
		stack_report "$w/worker.k" | grep -v '^stackname '
	fi

	local line
	line=$(python3 - "$replies" "$poll_calls" "$worker_calls" "$poll_heap" "$worker_heap" "$pmd_calls" "$other_calls" "$part" <<'PY'
import sys
r = int(sys.argv[1])
pc, wc, ph, wh, pmd, oth = (int(x) for x in sys.argv[2:8])
part = sys.argv[8]
f = lambda n: f"{n / r:.4g}"
out = f"p3 {part} polling_syscalls_per_req={f(pc)}"
if part == "af_packet":
    out += f" pmd_syscalls_per_req={f(pmd)} other_syscalls_per_req={f(oth)}"
out += f" worker_syscalls_per_req={f(wc)} polling_heap_per_req={f(ph)} worker_heap_per_req={f(wh)}"
out += f" replies={r} polling_syscalls={pc} worker_syscalls={wc} polling_heap={ph} worker_heap={wh}"
print(out)
PY
)
	echo "$line" >>"$RESULTS"
	echo "  $line"
}

# load_summary DIR: bwload's last line and its errors by status (the whole run, not the window)
load_summary() {
	echo "  bwload (whole run): $(tail -n 1 "$1/load.out")"
	python3 - "$1/load.json" <<'PY'
import json, sys
try:
    run = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(0)
errs = {k: v for k, v in run.get("errors_by_status", {}).items() if v}
if errs:
    print("  bwload errors by status:", ", ".join(f"{k} {v}" for k, v in errs.items()))
PY
}

# lcore_tids PID: the polling lcores' threads (bw-poll-N), comma-separated
lcore_tids() {
	threads "$1" | awk '$2 ~ /^bw-poll-/ { printf "%s%s", sep, $1; sep = "," }'
}

# wait_replies PREFIX LOG: until batchwire has answered some of bwload's requests
wait_replies() {
	local n
	for _ in $(seq 1 60); do
		n=$(echo /batchwire/stats | dpdk-telemetry.py -f "$1" 2>/dev/null | grep -F '"/batchwire/stats"' |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["/batchwire/stats"]["replies"])' 2>/dev/null)
		[ "${n:-0}" -gt 100 ] && return 0
		sleep 0.5
	done
	die "no load reached batchwire within 30 s: $(tail -n 3 "$2")"
}

# ---- memif -----------------------------------------------------------------------------------------

# In a subshell, as the af_packet part: its EXIT trap stops what it started.
part_memif() (
	w=$TOP/memif
	sock=$w/memif.sock
	prefix=p3-srv-$$
	pid=
	load_pid=
	mkdir -p "$w"
	cleanup_memif() {
		local rc=$?
		[ -n "$load_pid" ] && kill -TERM "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null
		[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
		rm -rf "/var/run/dpdk/$prefix" "/var/run/dpdk/p3-cli-$$" "/dev/shm/bwheap-$pid"
		exit "$rc"
	}
	trap cleanup_memif EXIT

	OPENBLAS_NUM_THREADS=1 LD_PRELOAD=$HEAPCOUNT "$BATCHWIRE" --no-huge -m 1024 --no-pci --file-prefix "$prefix" -l 0-1 \
		--vdev "net_memif0,role=server,socket=$sock" -- --ip 10.79.0.1 --mtu 1500 "${MODEL_ARGS[@]}" \
		>"$w/server.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do
		grep -q "serving on" "$w/server.log" && break
		kill -0 "$pid" 2>/dev/null || die "memif: batchwire exited during start-up: $(tail -n 3 "$w/server.log")"
		sleep 0.2
	done
	grep -q "serving on" "$w/server.log" || die "memif: batchwire did not start within 20 s"
	[ -f "/dev/shm/bwheap-$pid" ] || die "memif: no heap table /dev/shm/bwheap-$pid (LD_PRELOAD failed?)"

	"$BWLOAD" --no-huge -m 512 --no-pci --file-prefix "p3-cli-$$" -l 0 \
		--vdev "net_memif0,role=client,socket=$sock" -- --server 10.79.0.1 --ip 10.79.0.2 \
		--mix "$MIX" --rate "$RATE" --duration "$LOAD_S" --json "$w/load.json" --quiet \
		>"$w/load.out" 2>"$w/load.err" &
	load_pid=$!
	wait_replies "$prefix" "$w/load.err"
	sleep "$WARMUP_S"

	echo "== memif: batchwire pid $pid, threads:"
	threads "$pid" | sed 's/^/  /'
	poll=$(lcore_tids "$pid")
	[ -n "$poll" ] || die "memif: no bw-poll-* thread"
	measure memif "$pid" "$prefix" "$poll" "$pid"
	wait "$load_pid"
	load_pid=
	load_summary "$w"
)

# ---- af_packet ---------------------------------------------------------------------------------------

# In a subshell: netns.sh's traps (bw_cleanup on EXIT) are the subshell's.
part_af_packet() (
	BW_TAG=p3
	BW_MTU=1500
	# shellcheck source=../tests/integration/netns.sh
	. "$SRC/tests/integration/netns.sh"
	bw_env_check
	bw_net_up
	load_pid=
	# netns.sh's cleanup, after stopping bwload if it still runs
	trap 'rc=$?; [ -n "$load_pid" ] && kill -TERM "$load_pid" 2>/dev/null; (exit "$rc"); bw_cleanup' EXIT
	w=$TOP/af_packet
	mkdir -p "$w"
	BW_LOG=$w/server.log

	# bw_daemon_start's command line, with the heap counter preloaded into batchwire alone (env
	# execs it: ip netns exec, env and batchwire are one process, one pid)
	ip netns exec "$BW_SRV_NS" env OPENBLAS_NUM_THREADS=1 LD_PRELOAD="$HEAPCOUNT" "$BATCHWIRE" \
		--no-huge -m 1024 --no-pci --file-prefix "$BW_PREFIX" -l 0-1 \
		--vdev "net_af_packet0,iface=$BW_SRV_IF,$BW_AF_PACKET_ARGS" -- \
		--ip "$BW_SERVER_IP" --mtu "$BW_MTU" "${MODEL_ARGS[@]}" >"$BW_LOG" 2>&1 &
	BW_DAEMON_PID=$!
	for _ in $(seq 1 100); do
		grep -q "serving on" "$BW_LOG" && break
		kill -0 "$BW_DAEMON_PID" 2>/dev/null || die "af_packet: batchwire exited during start-up: $(tail -n 3 "$BW_LOG")"
		sleep 0.2
	done
	grep -q "serving on" "$BW_LOG" || die "af_packet: batchwire did not start within 20 s"
	pid=$BW_DAEMON_PID
	[ "$(cat "/proc/$pid/comm")" = batchwire ] || die "af_packet: pid $pid is not batchwire"
	[ -f "/dev/shm/bwheap-$pid" ] || die "af_packet: no heap table /dev/shm/bwheap-$pid"

	bw_cli "$BWLOAD" --socket --server "$BW_SERVER_IP" --mtu "$BW_MTU" --mix "$MIX" --rate "$RATE" \
		--duration "$LOAD_S" --json "$w/load.json" --quiet >"$w/load.out" 2>"$w/load.err" &
	load_pid=$!
	wait_replies "$BW_PREFIX" "$w/load.err"
	sleep "$WARMUP_S"

	echo "== af_packet: batchwire pid $pid, threads:"
	threads "$pid" | sed 's/^/  /'
	poll=$(lcore_tids "$pid")
	[ -n "$poll" ] || die "af_packet: no bw-poll-* thread"
	measure af_packet "$pid" "$BW_PREFIX" "$poll" "$pid"
	wait "$load_pid"
	load_pid=
	load_summary "$w"
	bw_daemon_stop >/dev/null
	rm -f "/dev/shm/bwheap-$pid"
)

echo "p3: $(date), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, load average$(uptime | sed 's/.*load average//')"
echo "p3: rate $RATE/s, mix $MIX, MTU 1500, window ${WINDOW_S} s after ${WARMUP_S} s of load"
for part in $PARTS; do
	case $part in
	memif) part_memif ;;
	af_packet) part_af_packet ;;
	*) die "unknown part $part" ;;
	esac
	rc=$?
	[ "$rc" -eq 0 ] || exit "$rc"
done
echo
cat "$RESULTS"
