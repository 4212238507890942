#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bwload's kernel-socket mode (hosts without DPDK) against batchwire on af_packet (netns.sh), at MTU
# 1500: an open loop of echo and the MLP (3 datagrams each) and a closed loop, a few seconds at small
# rates, no timing assertions: every request OK, bwload's conservation line holds, and the server's
# replies by status and datagrams agree with bwload's counts.
#
# Usage (as root): bwload_socket_netns.sh BATCHWIRE BWLOAD MODELS_DIR
set -u
BW_TAG=bwls
BW_MTU=1500
. "$(dirname "$0")/netns.sh"
BATCHWIRE=$1
BWLOAD=$2
MODELS=$3

[ -f "$MODELS/mlp.onnx" ] || bw_skip "$MODELS/mlp.onnx is missing (the models/ targets need python3 with onnx and numpy)"
bw_env_check
bw_net_up
WORK=$(mktemp -d /tmp/bw-bwls.XXXXXX)
trap 'bw_cleanup; rm -rf "$WORK"' EXIT

bw_daemon_start "$BATCHWIRE" --model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8 \
	--model-opt mlp.allowed_batch_sizes=1,2,4,8 --model-opt mlp.batch_timeout_micros=200

# run NAME COUNT [bwload options...]: one bwload run in the client namespace, checked against the server
run() {
	local name=$1 count=$2
	shift 2
	bw_telemetry /batchwire/stats >"$WORK/$name.before"
	bw_cli "$BWLOAD" --socket --server "$BW_SERVER_IP" --mtu "$BW_MTU" --count "$count" --quiet \
		--json "$WORK/$name.json" "$@" >"$WORK/$name.out" 2>&1 || bw_fail "$name: bwload exited $?: $(tail -n 3 "$WORK/$name.out")"
	bw_telemetry /batchwire/stats >"$WORK/$name.after"
	echo "  $name: $(tail -n 1 "$WORK/$name.out")"
	grep -q "sent=$count ok=$count errors=0 timeouts=0 malformed=0 conserved=yes" "$WORK/$name.out" ||
		bw_fail "$name: expected $count OK"
	python3 - "$WORK" "$name" <<'PY' || bw_fail "$name: bwload and the server disagree"
import json, sys
work, name = sys.argv[1], sys.argv[2]
run = json.load(open(f"{work}/{name}.json"))
b = json.load(open(f"{work}/{name}.before"))["/batchwire/stats"]
a = json.load(open(f"{work}/{name}.after"))["/batchwire/stats"]
c, setup = run["counts"], run["conf"]
checks = [
    ("server OK replies = bwload OK + its MODEL_INFO replies",
     a["replies_by_status"]["OK"] - b["replies_by_status"]["OK"], c["ok"] + setup["setup_replies"]),
    ("server datagrams in = bwload's", a["requests"] - b["requests"], c["datagrams_out"] + setup["setup_datagrams_out"]),
    ("error replies", sum(a["replies_by_status"].values()) - a["replies_by_status"]["OK"]
     - (sum(b["replies_by_status"].values()) - b["replies_by_status"]["OK"]), 0),
    ("nothing held at the end", (a["reasm_messages"], a["held_messages"]), (0, 0)),
]
ok = True
for what, got, want in checks:
    print(f"    {what}: {got} (expected {want})")
    ok &= got == want
sys.exit(0 if ok else 1)
PY
}
echo "== bwload --socket from $BW_CLI_NS, MTU $BW_MTU"
run open 600 --mix "model=echo;model=mlp" --rate 300
grep -q "model=mlp: sent [0-9]*, ok [0-9]*, 3 datagrams each" "$WORK/open.out" || bw_fail "open: the MLP's requests were not segmented"
run closed 400 --mix "model=mlp,rows=2" --closed 4
bw_daemon_stop
echo "PASS"
