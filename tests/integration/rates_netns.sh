#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Rate limits end to end: batchwire with low error_reply_rate, icmp_rate and arp_rate; rates.py sends
# bursts of each far above them from the client namespace and checks the counters (answered + dropped
# = sent, drops > 0, answered within what the rate allows over the burst's time).
#
# Usage (as root): tests/integration/rates_netns.sh BATCHWIRE
set -u
BW_TAG=rate
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE}

bw_env_check
python3 -c 'import scapy' 2>/dev/null || bw_skip "scapy is not installed (pip install scapy)"
bw_net_up
bw_daemon_start "$BATCHWIRE" --error-reply-rate 200 --icmp-rate 100 --arp-rate 100

bw_cli python3 "$(dirname "$0")/rates.py" --iface "$BW_CLI_IF" --server-ip "$BW_SERVER_IP" \
	--client-ip "$BW_CLIENT_IP" --error-rate 200 --icmp-rate 100 --arp-rate 100 \
	--telemetry "echo /batchwire/stats | dpdk-telemetry.py -f $BW_PREFIX | grep -F /batchwire/stats | tail -n 1" ||
	bw_fail "a rate limit did not hold"

kill -0 "$BW_DAEMON_PID" 2>/dev/null || bw_fail "batchwire died"
bw_daemon_stop
echo "PASS: error replies, ICMP and ARP limited to their rates, every datagram accounted for"
