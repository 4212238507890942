#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# batchwire --doctor on this machine's real sysfs and procfs (the fake trees are app-doctor's):
#  - with --no-huge and a virtual port, nothing blocks: exit 0, a line per check, the counts last;
#  - with hugepages asked for where none are reserved, or a PCI address that does not exist, it
#    says so, with the fix, and exits 1, before EAL could fail with its own messages;
#  - a normal start prints the same findings (not the ok lines) before EAL's.
#
# Usage: doctor_check.sh BATCHWIRE
set -u
BATCHWIRE=${1:?usage: $0 BATCHWIRE}
fail() { echo "FAIL: $*"; exit 1; }

out=$("$BATCHWIRE" --doctor --no-huge -m 256 -l 0-1 --vdev net_null0 -- --ip 10.0.0.1 --http off 2>&1)
rc=$?
echo "$out" | sed 's/^/  /'
[ "$rc" -eq 0 ] || fail "--doctor with --no-huge and a virtual port exited $rc"
echo "$out" | grep -q "^doctor: ok    lcores: 2, polling on CPUs 1$" || fail "no lcores line"
echo "$out" | grep -q "^doctor: WARN  hugepages: --no-huge" || fail "no --no-huge warning"
echo "$out" | tail -n 1 | grep -Eq "^doctor: 0 blocking, [0-9]+ warnings: nothing blocks a start \(exit 0\)$" ||
	fail "the last line is not the counts"

free=$(cat /sys/devices/system/node/node*/hugepages/hugepages-*/free_hugepages 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
out=$("$BATCHWIRE" --doctor -l 0-1 -a 0000:ff:1f.7 -- --ip 10.0.0.1 --http off 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "--doctor with a PCI address that does not exist exited $rc: $out"
echo "$out" | grep -q "port 0000:ff:1f.7: no such PCI device" || fail "the missing device is not named: $out"
if [ "$free" -eq 0 ]; then
	echo "$out" | grep -q "FAIL  hugepages: node 0 has none free" || fail "no hugepages here, and no finding: $out"
	echo "this host has no free hugepages: --doctor says so and how to reserve them"
fi
echo "--doctor with a missing PCI device: exit 1, the device named"

# a real start, which then fails in EAL (that device does not exist): the findings come first
out=$("$BATCHWIRE" --no-huge -m 256 -l 0-1 --file-prefix "bw-doctor-$$" -a 0000:ff:1f.7 -- --ip 10.0.0.1 --http off 2>&1)
echo "$out" | grep -q "^batchwire: doctor: FAIL  port 0000:ff:1f.7: no such PCI device" ||
	fail "a start did not print the doctor's findings: $(echo "$out" | head -n 5)"
echo "$out" | grep -q "doctor: ok" && fail "a start printed the doctor's ok lines"
rm -rf "/var/run/dpdk/bw-doctor-$$"
echo "PASS: --doctor on this host; its findings at start-up"
