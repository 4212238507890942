#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Signed requests end to end: batchwire with a key file and the echo model requiring signatures.
#  1. auth.py signs datagrams itself (Python's hmac) and checks every outcome: the right key, a replay,
#     a wrong secret, an unknown key id, a stale request_id, the same bytes from another port, an
#     unsigned request to the model, an unpadded signed MODEL_INFO; auth_by_outcome rises exactly.
#  2. bwcli --key-file: signed PING in segments, signed INFER; unsigned INFER refused.
#  3. Key rotation under load: a client signing with key 1 runs while the key file is rewritten to
#     hold key 2 only and reloaded (SIGHUP, then /batchwire/auth/reload): not one request fails (key 1
#     is in its overlap), key 2 works at once, and once the overlap ends key 1 is refused.
#
# Usage (as root): tests/integration/auth_netns.sh BATCHWIRE BWCLI
set -u
BW_TAG=auth
BW_MTU=1500
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE BWCLI}
BWCLI=${2:?usage: $0 BATCHWIRE BWCLI}
# the load below (3000 requests at the echo model's 1 ms window) runs about 3 s: inside the overlap
OVERLAP_S=8

bw_env_check
bw_net_up

KEYS=$(mktemp /tmp/bw-auth-keys.XXXXXX)
KEY1=$(mktemp /tmp/bw-auth-key1.XXXXXX)
KEY2=$(mktemp /tmp/bw-auth-key2.XXXXXX)
trap 'rm -f "$KEYS" "$KEY1" "$KEY2"; bw_cleanup' EXIT
SECRET1=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECRET2=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
chmod 600 "$KEYS" "$KEY1" "$KEY2"
printf '# rotation test\n1 %s\n' "$SECRET1" >"$KEYS"
printf '1 %s\n' "$SECRET1" >"$KEY1"
printf '2 %s\n' "$SECRET2" >"$KEY2"

bw_daemon_start "$BATCHWIRE" --auth-keys "$KEYS" --auth-overlap-s "$OVERLAP_S" --model-opt echo.auth=required
grep -q "signed requests: keys from $KEYS" "$BW_LOG" || bw_fail "no start-up line about the key file"

# 1. every outcome, counted
bw_cli python3 "$(dirname "$0")/auth.py" --server-ip "$BW_SERVER_IP" --client-ip "$BW_CLIENT_IP" \
	--key-id 1 --key-hex "$SECRET1" \
	--telemetry "echo /batchwire/stats | dpdk-telemetry.py -f $BW_PREFIX | grep -F /batchwire/stats | tail -n 1" ||
	bw_fail "signed-request outcomes did not match"

cli() { bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" --timeout-ms 500 --retries 2 "$@"; }

# 2. the client library signs: PING in segments (4000 bytes at MTU 1500), INFER; unsigned INFER refused
cli --key-file "$KEY1" ping --count 5 --size 4000 --quiet | tail -n 1 | grep -q "ok=5 " ||
	bw_fail "signed segmented ping: not 5 of 5"
cli --key-file "$KEY1" infer --model echo --count 50 --shape 1,16 --expect-echo --quiet | tail -n 1 |
	grep -q "^sent=50 ok=50 errors=0 " || bw_fail "signed INFER: not 50 correct replies"
out=$(cli infer --model 0 --count 1 --shape 1,16 2>&1)
echo "$out" | grep -q "UNAUTHENTICATED" || bw_fail "unsigned INFER to echo was not refused UNAUTHENTICATED: $out"
echo "bwcli: signed ping in segments and signed INFER served; unsigned INFER refused"

# 3. rotation under load
cli --key-file "$KEY1" infer --model 0 --count 3000 --shape 1,16 --expect-echo --quiet >"$BW_LOG.load" 2>&1 &
load=$!
sleep 0.3
printf '# rotated\n2 %s\n' "$SECRET2" >"$KEYS"
kill -HUP "$BW_DAEMON_PID"
for _ in $(seq 1 50); do
	grep -q "SIGHUP: key file reloaded, 2 keys accepted" "$BW_LOG" && break
	sleep 0.1
done
grep -q "SIGHUP: key file reloaded, 2 keys accepted" "$BW_LOG" || bw_fail "SIGHUP did not reload the key file: $(tail -n 2 "$BW_LOG")"
reload=$(bw_telemetry /batchwire/auth/reload)
echo "$reload" | grep -q '"reloaded"' || bw_fail "/batchwire/auth/reload: $reload"
kill -0 "$load" 2>/dev/null || bw_fail "the load ended before both reloads: it proves nothing (make it longer)"
cli --key-file "$KEY2" ping --count 3 --quiet | tail -n 1 | grep -q "ok=3 " || bw_fail "key 2 not accepted after the reload"
wait "$load" || bw_fail "the client signing with key 1 saw failures during the rotation: $(tail -n 2 "$BW_LOG.load")"
tail -n 1 "$BW_LOG.load" | grep -q "^sent=3000 ok=3000 errors=0 timeouts=0 " ||
	bw_fail "rotation under load: $(tail -n 1 "$BW_LOG.load")"
echo "rotation: 3000 requests signed with key 1 across two reloads, all OK; key 2 accepted at once"
auth=$(bw_telemetry /batchwire/auth)
echo "telemetry: $auth"
[ "$(echo "$auth" | bw_json 'd["keys_in_overlap"]')" = 1 ] || bw_fail "key 1 is not shown in its overlap"

sleep $((OVERLAP_S + 1))
out=$(cli --key-file "$KEY1" --retries 0 ping --count 1 2>&1)
echo "$out" | grep -q "unknown key id" || bw_fail "key 1 still accepted after its overlap: $out"
echo "after the overlap key 1 is refused"

kill -0 "$BW_DAEMON_PID" 2>/dev/null || bw_fail "batchwire died"
bw_daemon_stop
echo "PASS: signed requests, every outcome counted, rotation under load without a failed request"
