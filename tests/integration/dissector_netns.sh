#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The Wireshark dissector (deploy/wireshark/batchwire.lua) on a real capture: tshark records the
# client's veth end while bwcli sends an INFER to echo, a signed PING and a MODEL_INFO of a model that
# does not exist; tshark then decodes the capture with the dissector and the fields of each request
# and reply must be what was sent and answered.
#
# Usage (as root): tests/integration/dissector_netns.sh BATCHWIRE BWCLI
set -u
BW_TAG=wsk
BW_MTU=1500
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE BWCLI}
BWCLI=${2:?usage: $0 BATCHWIRE BWCLI}
LUA="$(cd "$(dirname "$0")/../../deploy/wireshark" && pwd)/batchwire.lua"

bw_env_check
command -v tshark >/dev/null || bw_skip "tshark is not installed (apt-get install tshark)"
bw_net_up
KEYS=$(mktemp /tmp/bw-wsk-keys.XXXXXX)
PCAP=$(mktemp /tmp/bw-wsk.XXXXXX.pcap)
trap 'rm -f "$KEYS" "$PCAP"; bw_cleanup' EXIT
chmod 600 "$KEYS" "$PCAP"
printf '9 %s\n' 00112233445566778899aabbccddeeff >"$KEYS"
bw_daemon_start "$BATCHWIRE" --auth-keys "$KEYS"

bw_cli tshark -q -i "$BW_CLI_IF" -f "udp port 7878" -w "$PCAP" -a duration:20 >/dev/null 2>&1 &
cap=$!
for _ in $(seq 1 50); do [ -s "$PCAP" ] && break; sleep 0.1; done
sleep 0.5
cli() { bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" --retries 0 "$@"; }
cli infer --model 0 --shape 1,16 --count 1 --expect-echo --quiet >/dev/null || bw_fail "echo INFER failed"
cli --key-file "$KEYS" ping --count 1 --quiet >/dev/null || bw_fail "signed PING failed"
cli info --model nope >/dev/null 2>&1
sleep 0.5
kill -INT "$cap" 2>/dev/null
wait "$cap" 2>/dev/null

fields=$(tshark -X lua_script:"$LUA" -r "$PCAP" -Y bw -T fields -E separator='|' \
	-e bw.opcode -e bw.status -e bw.num_tensors -e bw.tensor.dtype -e bw.tensor.dims -e bw.flags.auth \
	-e bw.auth.key_id -e bw.message -e bw.flags.padded 2>/dev/null)
echo "$fields" | sed 's/^/  /'
python3 - "$fields" <<'PYEOF' || bw_fail "the dissector's fields are not what was sent"
import sys
rows = [line.split("|") for line in sys.argv[1].strip().splitlines()]
ok = True
def want(what, cond):
    global ok
    print(f"  {what}: {'ok' if cond else 'MISMATCH'}")
    ok &= bool(cond)
by_op = {}
for r in rows:
    by_op.setdefault(int(r[0], 16), []).append(r)
want("an INFER with one FLOAT tensor [1,16]", any(r[2] == "1" and r[3] == "1" and r[4] == "[1,16]" for r in by_op.get(0x02, [])))
want("its OK reply, the tensor echoed", any(r[1] == "0" and r[4] == "[1,16]" for r in by_op.get(0x82, [])))
want("a signed PING with key id 9", any(r[5] in ("1", "True") and r[6] == "9" for r in by_op.get(0x01, [])))
want("its OK reply, not signed", any(r[1] == "0" and r[5] in ("0", "False") for r in by_op.get(0x81, [])))
want("a MODEL_INFO answered NOT_FOUND with its message", any(r[1] == "2" and "no model" in r[7] for r in by_op.get(0x83, [])))
sys.exit(0 if ok else 1)
PYEOF
bw_daemon_stop
echo "PASS: the dissector decodes requests, replies, tensors, trailers and error messages"
