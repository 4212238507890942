#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bwrun --profile and --profile-steps on the transformer (79 steps): the ops' lines add up to the run, the slowest steps
# listed are as many as asked (12 by default, every step for 0) in descending order, and
# --profile-steps without --profile is refused with one line.
#   bwrun_profile.sh BWRUN MINILM.onnx
set -u
bwrun="$1"
model="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }

for steps in default 2 0; do
	set -- --batch 1 --repeat 2 --profile
	[ "$steps" = default ] || set -- "$@" --profile-steps "$steps"
	"$bwrun" "$@" "$model" >"$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; fail "bwrun $* failed"; }
	python3 - "$tmp/out.txt" "$steps" <<'PY' || exit 1
import re, sys
text, asked = open(sys.argv[1]).read(), sys.argv[2]
head = re.search(r"^profile  (\d+) steps, ([\d.]+) us a run", text, re.M)
assert head, "no 'profile  N steps' line"
total_steps, run_us = int(head.group(1)), float(head.group(2))
ops = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(r"^profile  op \S+ +x(\d+) +([\d.]+) us", text, re.M)]
steps = [float(m.group(1)) for m in re.finditer(r"^profile  step \d+ +\S+ +([\d.]+) us", text, re.M)]
assert sum(n for n, _ in ops) == total_steps, (ops, total_steps)
assert abs(sum(us for _, us in ops) - run_us) <= 0.01 * run_us + 1.0, (ops, run_us)
want = {"default": min(12, total_steps), "2": min(2, total_steps), "0": total_steps}[asked]
assert len(steps) == want, f"--profile-steps {asked}: {len(steps)} steps listed, expected {want}"
assert steps == sorted(steps, reverse=True), "the steps are not slowest first"
print(f"  --profile-steps {asked}: {len(steps)} of {total_steps} steps listed, {len(ops)} ops, {run_us} us a run")
PY
done

"$bwrun" --profile-steps 3 "$model" >"$tmp/refused.txt" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "--profile-steps without --profile was accepted"
grep -q -- "give --profile too" "$tmp/refused.txt" || fail "no reason given: $(cat "$tmp/refused.txt")"
echo "  --profile-steps without --profile: exit $rc, $(head -n 1 "$tmp/refused.txt")"
echo "PASS"
