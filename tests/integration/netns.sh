#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Two network namespaces joined by a veth pair, batchwire on net_af_packet at one end: the setup the
# demo and the integration tests share. Source it, set BW_TAG (a short word), then call
# bw_env_check, bw_net_up, bw_daemon_start ... bw_daemon_stop; bw_cleanup runs on EXIT.
#
#   namespace bw-srv-$BW_TAG   veth bws-$BW_TAG  10.77.0.1/24  (batchwire, DPDK af_packet, no kernel IP)
#   namespace bw-cli-$BW_TAG   veth bwc-$BW_TAG  10.77.0.2/24  (bwcli, scapy; MTU $BW_MTU on both ends,
#                                                             9000 unless set before sourcing)
#
# Run as root. Exits 77 (meson's SKIP) with the reason when namespaces or tools are unavailable.

BW_SERVER_IP=10.77.0.1
BW_CLIENT_IP=10.77.0.2
BW_MTU=${BW_MTU:-9000}
# af_packet frame slots must fit the mbuf data room of the MTU: 9216 bytes hold a 9000-byte-MTU
# frame (4 slots per 36 KiB block), 2048 a 1500-byte one. 4096 slots take the bursts of segments a
# 600 KB request arrives in (410 datagrams at MTU 1500) from several clients at once.
if [ "$BW_MTU" -gt 1500 ]; then
	BW_AF_PACKET_ARGS="framesz=9216,blocksz=36864,framecnt=2048"
else
	BW_AF_PACKET_ARGS="framesz=2048,blocksz=4096,framecnt=4096"
fi

: "${BW_TAG:?set BW_TAG before sourcing netns.sh}"
BW_SRV_NS="bw-srv-$BW_TAG"
BW_CLI_NS="bw-cli-$BW_TAG"
BW_SRV_IF="bws-$BW_TAG"
BW_CLI_IF="bwc-$BW_TAG"
BW_PREFIX="bw-$BW_TAG-$$"
BW_LOG="${BW_LOG:-$(mktemp /tmp/batchwire-$BW_TAG.XXXXXX.log)}"
BW_DAEMON_PID=

bw_skip() {
	echo "SKIP: $*"
	exit 77
}

bw_fail() {
	echo "FAIL: $*"
	exit 1
}

bw_env_check() {
	[ "$(id -u)" -eq 0 ] || bw_skip "needs root for network namespaces and af_packet"
	for tool in ip ethtool nstat dpdk-telemetry.py python3; do
		command -v "$tool" >/dev/null || bw_skip "$tool is not installed"
	done
	ip netns add "bw-probe-$$" 2>/dev/null || bw_skip "cannot create network namespaces here"
	ip netns del "bw-probe-$$"
}

bw_cleanup() {
	local rc=$?
	if [ -n "$BW_DAEMON_PID" ] && kill -0 "$BW_DAEMON_PID" 2>/dev/null; then
		kill -TERM "$BW_DAEMON_PID" 2>/dev/null
		sleep 1
		kill -KILL "$BW_DAEMON_PID" 2>/dev/null
	fi
	ip netns del "$BW_SRV_NS" 2>/dev/null
	ip netns del "$BW_CLI_NS" 2>/dev/null
	rm -rf "/var/run/dpdk/$BW_PREFIX"
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -f "$BW_LOG" ]; then
		echo "--- batchwire log ($BW_LOG) ---"
		tail -n 40 "$BW_LOG"
	fi
	exit "$rc"
}

bw_net_up() {
	trap bw_cleanup EXIT
	trap 'exit 130' INT TERM
	ip netns del "$BW_SRV_NS" 2>/dev/null
	ip netns del "$BW_CLI_NS" 2>/dev/null
	ip netns add "$BW_SRV_NS" || bw_fail "ip netns add $BW_SRV_NS"
	ip netns add "$BW_CLI_NS" || bw_fail "ip netns add $BW_CLI_NS"
	ip link add "$BW_SRV_IF" type veth peer name "$BW_CLI_IF" || bw_fail "cannot create the veth pair"
	ip link set "$BW_SRV_IF" netns "$BW_SRV_NS"
	ip link set "$BW_CLI_IF" netns "$BW_CLI_NS"
	for ns in "$BW_SRV_NS" "$BW_CLI_NS"; do
		# No IPv6 chatter (router and neighbour solicitations) to blur the drop counters.
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
		ip -n "$ns" link set lo up
	done
	ip -n "$BW_SRV_NS" link set "$BW_SRV_IF" mtu "$BW_MTU" up
	ip -n "$BW_CLI_NS" link set "$BW_CLI_IF" mtu "$BW_MTU" up
	ip -n "$BW_CLI_NS" addr add "$BW_CLIENT_IP/24" dev "$BW_CLI_IF"
	# veth leaves checksums to be filled in later (CHECKSUM_PARTIAL); af_packet would hand batchwire
	# half-done ones. Off, the client's kernel computes them as a real NIC's peer would see them.
	ip netns exec "$BW_CLI_NS" ethtool -K "$BW_CLI_IF" tx off >/dev/null
	ip netns exec "$BW_CLI_NS" nstat -n # start nstat's history so later readings are deltas
}

# bw_daemon_start BATCHWIRE [extra app args...]
bw_daemon_start() {
	local exe=$1
	shift
	# One BLAS thread per call (the worker lcore's): no pool of OpenBLAS threads beside the lcores.
	OPENBLAS_NUM_THREADS=1 ip netns exec "$BW_SRV_NS" "$exe" --no-huge -m 1024 --no-pci --file-prefix "$BW_PREFIX" -l 0-1 \
		--vdev "net_af_packet0,iface=$BW_SRV_IF,$BW_AF_PACKET_ARGS" -- \
		--ip "$BW_SERVER_IP" --mtu "$BW_MTU" "$@" >"$BW_LOG" 2>&1 &
	BW_DAEMON_PID=$!
	bw_wait_serving "$BW_DAEMON_PID" "$BW_LOG" batchwire
}

# bw_wait_serving PID LOG NAME: until LOG says "serving on" (20 s at most); fails if PID exits first.
bw_wait_serving() {
	local pid=$1 log=$2 name=$3
	for _ in $(seq 1 100); do
		grep -q "serving on" "$log" && return 0
		kill -0 "$pid" 2>/dev/null || bw_fail "$name exited during start-up: $(tail -n 3 "$log")"
		sleep 0.2
	done
	bw_fail "$name did not start within 20 s"
}

# Stops batchwire with SIGTERM and checks it exits 0 with its summary line.
bw_daemon_stop() {
	local rc
	kill -TERM "$BW_DAEMON_PID"
	wait "$BW_DAEMON_PID"
	rc=$?
	BW_DAEMON_PID=
	[ "$rc" -eq 0 ] || bw_fail "batchwire exited $rc after SIGTERM"
	grep "batchwire: stopped:" "$BW_LOG" || bw_fail "batchwire printed no summary on stop"
}

# bw_cli CMD...: runs a command in the client namespace.
bw_cli() {
	ip netns exec "$BW_CLI_NS" "$@"
}

# bw_telemetry CMD[,PARAMS]: one JSON reply from batchwire's telemetry socket (keyed by CMD alone).
bw_telemetry() {
	echo "$1" | dpdk-telemetry.py -f "$BW_PREFIX" 2>/dev/null | grep -F "\"${1%%,*}\"" | tail -n 1
}

# bw_json 'expr' < json: evaluates a Python expression over the parsed reply `d` (d = its one value).
bw_json() {
	python3 -c 'import json,sys; d=list(json.load(sys.stdin).values())[0]; print(eval(sys.argv[1]))' "$1"
}
