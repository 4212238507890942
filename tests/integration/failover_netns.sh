#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The client across hosts: two batchwire instances serving the MLP, each in a namespace of its own
# (10.77.0.1 and 10.78.0.1, one lcore each on a CPU each), and bwcli --host A,B (the library's pool)
# sending requests one after another from the client namespace, which reaches both.
#  1. Both up: the requests are spread over both.
#  2. A stops gracefully (SIGTERM, drain_grace_ms 1500) in the middle of a run: its PING says
#     DRAINING, the pool leaves it, every request is answered OK.
#  3. A is back; B is killed (SIGKILL) in the middle of a run: requests to B time out and go to A
#     with the same request_id (failovers counted on B), every request is answered OK.
#  4. B is back; bwload --socket --server A,B at a steady rate, and B is killed again: bwload's
#     requests to B time out and are sent on to A with their request_ids, every one answered OK.
#
# Usage (as root): tests/integration/failover_netns.sh BATCHWIRE BWCLI MODELS_DIR BWLOAD
set -u
BW_TAG=fo
BW_MTU=1500
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE BWCLI MODELS_DIR}
BWCLI=${2:?usage: $0 BATCHWIRE BWCLI MODELS_DIR}
MODELS=${3:?usage: $0 BATCHWIRE BWCLI MODELS_DIR BWLOAD}
BWLOAD=${4:?usage: $0 BATCHWIRE BWCLI MODELS_DIR BWLOAD}
B_NS=bw-srv2-fo
B_IF=bws2-fo
B_CLI_IF=bwc2-fo
B_IP=10.78.0.1
B_LOG=$(mktemp /tmp/batchwire-fo-b.XXXXXX.log)
B_PID=

[ -f "$MODELS/mlp.onnx" ] || bw_skip "$MODELS/mlp.onnx is missing (the models/ targets need python3 with onnx and numpy)"
bw_env_check
bw_net_up
cleanup() {
	rc=$?
	[ -n "$B_PID" ] && kill -KILL "$B_PID" 2>/dev/null
	ip netns del "$B_NS" 2>/dev/null
	[ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && { echo "--- B's log ---"; tail -n 20 "$B_LOG"; }
	rm -f "$B_LOG"
	(exit $rc)
	bw_cleanup
}
trap cleanup EXIT
# B: a second namespace and veth pair; the client namespace holds both pairs' other ends
ip netns add "$B_NS" || bw_fail "ip netns add $B_NS"
ip link add "$B_IF" type veth peer name "$B_CLI_IF" || bw_fail "cannot create the second veth pair"
ip link set "$B_IF" netns "$B_NS"
ip link set "$B_CLI_IF" netns "$BW_CLI_NS"
ip netns exec "$B_NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
ip -n "$B_NS" link set lo up
ip -n "$B_NS" link set "$B_IF" mtu "$BW_MTU" up
ip -n "$BW_CLI_NS" link set "$B_CLI_IF" mtu "$BW_MTU" up
ip -n "$BW_CLI_NS" addr add 10.78.0.2/24 dev "$B_CLI_IF"
ip netns exec "$BW_CLI_NS" ethtool -K "$B_CLI_IF" tx off >/dev/null

MODEL_ARGS=(--model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8 --model-opt mlp.allowed_batch_sizes=1,2,4,8
	--drain-grace-ms 1500)
# start NAME NS IF IP CPU LOG: one lcore (it polls and works) on CPU CPU; sets LAST_PID
start() {
	local name=$1 ns=$2 ifc=$3 ip=$4 cpu=$5 log=$6
	OPENBLAS_NUM_THREADS=1 ip netns exec "$ns" "$BATCHWIRE" --no-huge -m 512 --no-pci --file-prefix "bw-fo-$name-$$" \
		--lcores "0@$cpu" --vdev "net_af_packet0,iface=$ifc,$BW_AF_PACKET_ARGS" -- --ip "$ip" --mtu "$BW_MTU" \
		"${MODEL_ARGS[@]}" >"$log" 2>&1 &
	LAST_PID=$!
	bw_wait_serving "$LAST_PID" "$log" "$name"
}
# run COUNT OUT: bwcli over both hosts, in the background; sets RUN_PID
run() {
	bw_cli "$BWCLI" --host "$BW_SERVER_IP,$B_IP" --mtu "$BW_MTU" --timeout-ms 200 --retries 1 infer --model mlp \
		--count "$1" --quiet >"$2" 2>&1 &
	RUN_PID=$!
}
check() { # OUT COUNT WHAT
	tail -n 1 "$1" | grep -q "sent=$2 ok=$2 errors=0 timeouts=0" || bw_fail "$3: $(grep -v '^  ' "$1" | tail -n 6)"
	grep "^host " "$1" | sed 's/^/  /'
}
host_field() { # OUT HOST FIELD -> its count on that host's line
	grep "^host $2:" "$1" | grep -o "$3 [0-9]*" | grep -o "[0-9]*$"
}

start A "$BW_SRV_NS" "$BW_SRV_IF" "$BW_SERVER_IP" 0 "$BW_LOG"
BW_DAEMON_PID=$LAST_PID
start B "$B_NS" "$B_IF" "$B_IP" 1 "$B_LOG"
B_PID=$LAST_PID

echo "== 1. both up"
run 400 "$BW_LOG.1"
wait "$RUN_PID"
check "$BW_LOG.1" 400 "both up"
for h in "$BW_SERVER_IP" "$B_IP"; do
	[ "$(host_field "$BW_LOG.1" "$h" ok)" -gt 50 ] || bw_fail "host $h took almost none of the requests"
done

echo "== 2. A stops gracefully during a run"
run 3000 "$BW_LOG.2"
sleep 1
kill -TERM "$BW_DAEMON_PID"
wait "$RUN_PID"
wait "$BW_DAEMON_PID" || bw_fail "A exited $? after SIGTERM"
BW_DAEMON_PID=
check "$BW_LOG.2" 3000 "A's drain"
[ "$(host_field "$BW_LOG.2" "$BW_SERVER_IP" "draining seen")" -ge 1 ] || bw_fail "no PING of A said DRAINING"
grep -q "drained in" "$BW_LOG" || bw_fail "A printed no drain line"

echo "== 3. A back, B killed during a run"
start A "$BW_SRV_NS" "$BW_SRV_IF" "$BW_SERVER_IP" 0 "$BW_LOG"
BW_DAEMON_PID=$LAST_PID
run 3000 "$BW_LOG.3"
sleep 1
kill -KILL "$B_PID"
wait "$B_PID" 2>/dev/null
B_PID=
wait "$RUN_PID"
check "$BW_LOG.3" 3000 "B killed"
[ "$(host_field "$BW_LOG.3" "$B_IP" failovers)" -ge 1 ] || bw_fail "no request to B failed over"
[ "$(host_field "$BW_LOG.3" "$BW_SERVER_IP" ok)" -gt "$(host_field "$BW_LOG.3" "$B_IP" ok)" ] ||
	bw_fail "A did not take over B's share"
echo "== 4. B back, bwload over both at 300/s, B killed during it"
start B "$B_NS" "$B_IF" "$B_IP" 1 "$B_LOG"
B_PID=$LAST_PID
bw_cli "$BWLOAD" --socket --server "$BW_SERVER_IP,$B_IP" --mtu "$BW_MTU" --rate 300 --count 1500 --timeout-ms 300 \
	--mix "model=mlp" --quiet >"$BW_LOG.4" 2>&1 &
RUN_PID=$!
sleep 2
kill -KILL "$B_PID"
wait "$B_PID" 2>/dev/null
B_PID=
wait "$RUN_PID" || bw_fail "bwload exited $?: $(tail -n 4 "$BW_LOG.4")"
grep "^server " "$BW_LOG.4" | sed 's/^/  /'
tail -n 1 "$BW_LOG.4" | grep -q "sent=1500 ok=1500 errors=0 timeouts=0" ||
	bw_fail "bwload lost requests when B was killed: $(tail -n 4 "$BW_LOG.4")"
grep "^server $B_IP:" "$BW_LOG.4" | grep -q "failovers [1-9]" || bw_fail "no bwload request to B failed over"
rm -f "$BW_LOG".[1234]
bw_daemon_stop
echo "PASS"
