#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The demo: batchwire on a virtual NIC with its built-in defaults. Two network namespaces joined by a
# veth pair (see tests/integration/netns.sh for names and addresses); batchwire polls one end through
# DPDK's af_packet PMD, bwcli talks to it from the other end over ordinary kernel UDP. Prints the
# client's summary and batchwire's telemetry counters (batch sizes among them: concurrent clients
# share batching windows), then stops batchwire with SIGTERM.
#
# Usage (as root): app/demo.sh [BUILD_DIR] [COUNT]
set -u
BW_TAG=demo
. "$(dirname "$0")/../tests/integration/netns.sh"
BUILD=${1:-build}
COUNT=${2:-5000}
BATCHWIRE=$BUILD/app/batchwire
BWCLI=$BUILD/client/bwcli
[ -x "$BATCHWIRE" ] && [ -x "$BWCLI" ] || bw_fail "build first: $BATCHWIRE and $BWCLI not found"

bw_env_check
bw_net_up
echo "== batchwire on net_af_packet ($BW_SRV_NS/$BW_SRV_IF, $BW_SERVER_IP:7878, MTU $BW_MTU); client in $BW_CLI_NS ($BW_CLIENT_IP)"
bw_daemon_start "$BATCHWIRE"
grep -E "batchwire: (port|lcore|serving)" "$BW_LOG"

echo "== ping from the client namespace: ICMP, then protocol v1 PING"
bw_cli ping -c 2 -q "$BW_SERVER_IP" | tail -n 2
bw_cli "$BWCLI" --host "$BW_SERVER_IP" ping --count 3

echo "== model info"
bw_cli "$BWCLI" --host "$BW_SERVER_IP" info --model echo

echo "== $COUNT echo inferences, 64 B to 8 KB (jumbo) tensors, every reply checked"
bw_cli "$BWCLI" --host "$BW_SERVER_IP" infer --model echo --count "$COUNT" \
	--shape 1,16 --shape 4,100 --shape 1,2000 --expect-echo --quiet

echo "== 4 clients at once, 1000 single-row requests each: they share batching windows"
for c in 1 2 3 4; do
	bw_cli "$BWCLI" --host "$BW_SERVER_IP" infer --model echo --count 1000 --shape 1,16 --expect-echo \
		--quiet | tail -n 1 | sed "s/^/  client $c: /" &
done
wait $(jobs -p | grep -vx "$BW_DAEMON_PID")

echo "== telemetry: dpdk-telemetry.py -f $BW_PREFIX, /batchwire/stats"
bw_telemetry /batchwire/stats | python3 -c '
import json, sys
stats = json.load(sys.stdin)["/batchwire/stats"]
for key, value in stats.items():
    if isinstance(value, dict):
        nonzero = {k: v for k, v in value.items() if v}
        print("  %-22s %s" % (key, nonzero or "all 0"))
    else:
        print("  %-22s %d" % (key, value))'

echo "== stopping batchwire (SIGTERM)"
bw_daemon_stop
