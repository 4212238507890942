#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# End to end on a virtual NIC: batchwire on net_af_packet in one namespace, bwcli in another.
# bwcli pings, then sends 10,000 echo requests (a tenth of them jumbo), each reply checked byte for
# byte; /batchwire/stats must count exactly what was sent; then 4 clients at once must see their
# requests batched together; the client's kernel must see no UDP checksum error, and SIGTERM must
# stop batchwire cleanly.
#
# Usage (as root): tests/integration/echo_netns.sh BATCHWIRE BWCLI [COUNT]
set -u
BW_TAG=echo
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE BWCLI [COUNT]}
BWCLI=${2:?usage: $0 BATCHWIRE BWCLI [COUNT]}
COUNT=${3:-10000}

bw_env_check
bw_net_up
bw_daemon_start "$BATCHWIRE"

bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" ping --count 5 --quiet | tail -n 1 | grep -q "ok=5 " ||
	bw_fail "ping: not 5 replies out of 5"
echo "ping: 5/5"

before=$(bw_telemetry /batchwire/stats)
[ -n "$before" ] || bw_fail "no /batchwire/stats from dpdk-telemetry.py -f $BW_PREFIX"

# Float32 shapes: 64 B to 8 KB of data, the last one a jumbo frame (8000 B + headers > 1500 MTU).
summary=$(bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" --timeout-ms 500 infer --model echo --count "$COUNT" \
	--shape 1,16 --shape 2,64 --shape 1,250 --shape 4,100 --shape 1,300 --shape 3,3,30 --shape 1,1 \
	--shape 8,32 --shape 1,500 --shape 1,2000 --expect-echo --quiet | tail -n 1)
echo "bwcli: $summary"
echo "$summary" | grep -q "^sent=$COUNT ok=$COUNT errors=0 timeouts=0 " || bw_fail "not $COUNT correct echo replies"

after=$(bw_telemetry /batchwire/stats)
echo "telemetry: $after"
# bwcli resolves the model name once with MODEL_INFO, then sends COUNT INFER requests.
expected=$((COUNT + 1))
delta() { echo $(($(echo "$after" | bw_json "$1") - $(echo "$before" | bw_json "$1"))); }
for counter in 'd["requests"]' 'd["replies"]' 'd["replies_by_status"]["OK"]'; do
	[ "$(delta "$counter")" -eq "$expected" ] ||
		bw_fail "telemetry $counter rose by $(delta "$counter"), expected $expected"
done
[ "$(delta 'd["drops"]')" -eq 0 ] || bw_fail "telemetry counted $(delta 'd["drops"]') drops during the run"
echo "telemetry: requests and OK replies rose by $expected, no drops"

# Under load, requests share batching windows: 4 clients at once, single-row requests.
before=$after
for c in 1 2 3 4; do
	bw_cli "$BWCLI" --host "$BW_SERVER_IP" --mtu "$BW_MTU" infer --model 0 --count 500 --shape 1,16 --expect-echo --quiet \
		>"$BW_LOG.load$c" 2>&1 &
done
wait_ok=1
for job in $(jobs -p); do
	[ "$job" = "$BW_DAEMON_PID" ] && continue
	wait "$job" || wait_ok=0
done
[ "$wait_ok" = 1 ] || bw_fail "a loaded client saw errors: $(tail -n 1 "$BW_LOG".load*)"
after=$(bw_telemetry /batchwire/stats)
batches=$(delta 'd["batch_batches"]')
rows=$(delta 'd["batch_rows"]')
[ "$rows" -eq 2000 ] || bw_fail "batcher ran $rows rows for 2000 single-row requests"
[ "$batches" -lt "$rows" ] || bw_fail "no batching under load: $batches batches for $rows requests"
echo "under load: 2000 requests from 4 clients ran in $batches batches; sizes: $(echo "$after" | bw_json 'd["batch_sizes"]')"

# The distributions: every answered request has a latency, every batch a window, queue and compute
# time; the buckets of /batchwire/hist add up to the counts; the polling lcore's busy share is a share
model=$(bw_telemetry /batchwire/model,echo)
hist=$(bw_telemetry /batchwire/hist,echo)
lcores=$(bw_telemetry /batchwire/lcores)
python3 - "$model" "$hist" "$lcores" "$after" <<'PYEOF' || bw_fail "distributions do not add up"
import json, sys
model, hist, lcores, stats = (list(json.loads(a).values())[0] for a in sys.argv[1:5])
ok = True
def check(what, cond):
    global ok
    print(f"  {what}: {'ok' if cond else 'MISMATCH'}")
    ok &= bool(cond)
check(f"latency_us count {model['latency_us']['count']} = requests_done {model['requests_done']}",
      model["latency_us"]["count"] == model["requests_done"])
for h in ("window_us", "queue_us", "compute_us", "rows_per_batch"):
    check(f"{h} count {model[h]['count']} = batches {model['batches']}", model[h]["count"] == model["batches"])
check(f"rows_per_batch sum = rows {model['rows']}", model["rows_per_batch"]["sum"] == model["rows"])
lat = model["latency_us"]
check(f"latency p50 {lat['p50']} <= p99 {lat['p99']} <= p999 {lat['p999']}", 0 < lat["p50"] <= lat["p99"] <= lat["p999"])
for h in ("latency_us", "window_us", "queue_us", "compute_us", "rows_per_batch"):
    check(f"/batchwire/hist {h}: buckets add up to {hist[h + '_count']}", sum(hist[h].values()) == hist[h + "_count"])
for name, lc in lcores.items():
    check(f"{name}: busy cycles {lc['poll_busy_cycles']} within {lc['poll_cycles']}",
          0 < lc["poll_busy_cycles"] <= lc["poll_cycles"])
check(f"ports: {list(stats['ports'])}", "port0" in stats["ports"] and stats["ports"]["port0"]["ipackets"] > 0)
sys.exit(0 if ok else 1)
PYEOF
echo "distributions: latency p50/p99 $(echo "$model" | bw_json 'd["latency_us"]["p50"]')/$(echo "$model" | bw_json 'd["latency_us"]["p99"]') us"

csum_errors=$(bw_cli nstat -az UdpInCsumErrors | awk '/UdpInCsumErrors/ {print $2}')
[ "${csum_errors:-x}" = 0 ] || bw_fail "client kernel counted ${csum_errors:-?} UDP checksum errors"
echo "client UdpInCsumErrors: 0"

bw_daemon_stop
echo "PASS: $COUNT/$COUNT echo replies, counters match"
