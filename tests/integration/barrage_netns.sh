#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Bad-input barrage: over 1,000 crafted bad frames in named classes (truncated, bad lengths, bad
# checksums, random bytes, valid headers with nonsense fields) sent with scapy from the client
# namespace. batchwire must stay up, raise each class's counter by exactly the number sent, and
# answer a good request afterwards.
#
# Usage (as root): tests/integration/barrage_netns.sh BATCHWIRE [PER_CLASS]
set -u
BW_TAG=bad
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE [PER_CLASS]}
PER_CLASS=${2:-80}

bw_env_check
python3 -c 'import scapy' 2>/dev/null || bw_skip "scapy is not installed (pip install scapy)"
bw_net_up
# only the client (and the /30 around it) may talk to the appliance: barrage.py forges others
bw_daemon_start "$BATCHWIRE" --allow 10.77.0.0/30

export BW_PREFIX
bw_cli python3 "$(dirname "$0")/barrage.py" --iface "$BW_CLI_IF" --server-ip "$BW_SERVER_IP" \
	--client-ip "$BW_CLIENT_IP" --per-class "$PER_CLASS" \
	--telemetry "echo /batchwire/stats | dpdk-telemetry.py -f $BW_PREFIX | grep -F /batchwire/stats | tail -n 1" ||
	bw_fail "barrage counts did not match"

kill -0 "$BW_DAEMON_PID" 2>/dev/null || bw_fail "batchwire died during the barrage"
bw_daemon_stop
echo "PASS: barrage counted exactly, batchwire still serving"
