#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# What `meson install` lays out (docs/deploy.md), checked without installing on this host: the
# build installed into a temporary DESTDIR, every file of the table there; the systemd unit verified
# by systemd-analyze (the copy that points at this build's batchwire); the man pages hold each
# program's options.
#
# Usage: deploy_check.sh BUILD_DIR
set -u
BUILD=${1:?usage: $0 BUILD_DIR}
fail() { echo "FAIL: $*"; exit 1; }

dest=$(mktemp -d /tmp/bw-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
meson install -C "$BUILD" --no-rebuild --destdir "$dest" >"$dest.log" 2>&1 ||
	fail "meson install: $(tail -n 5 "$dest.log")"
rm -f "$dest.log"
prefix=$(meson introspect "$BUILD" --buildoptions | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["bindir"], o["sysconfdir"], o["mandir"], o["datadir"])')
read -r PREFIX BINDIR SYSCONFDIR MANDIR DATADIR <<<"$prefix"
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PREFIX/$1" ;; esac; }
for f in "$(abs "$BINDIR")/batchwire" "$(abs "$BINDIR")/bwcli" "$(abs "$BINDIR")/bwload" "$(abs "$BINDIR")/bwrun" \
	"$PREFIX/lib/systemd/system/batchwire.service" "$(abs "$SYSCONFDIR")/default/batchwire" \
	"$(abs "$SYSCONFDIR")/batchwire/batchwire.ini.example" "$(abs "$MANDIR")/man8/batchwire.8" \
	"$(abs "$MANDIR")/man1/bwcli.1" "$(abs "$MANDIR")/man1/bwload.1" \
	"$(abs "$DATADIR")/batchwire/grafana/batchwire.json" "$(abs "$DATADIR")/batchwire/wireshark/batchwire.lua" \
	"$(abs "$DATADIR")/doc/batchwire/deploy.md"; do
	[ -f "$dest$f" ] || fail "meson install did not lay out $f"
done
echo "meson install: the programs, the unit, its environment file, the example INI, 3 man pages, the dashboard, the dissector, the docs"
unit="$dest$PREFIX/lib/systemd/system/batchwire.service"
grep -q "^ExecStart=$(abs "$BINDIR")/batchwire " "$unit" || fail "the installed unit does not start $(abs "$BINDIR")/batchwire"
grep -q "^Type=notify" "$unit" && grep -q "^WatchdogSec=" "$unit" || fail "the unit is not Type=notify with a watchdog"
for opt in --drain-grace-ms --http-infer-slots --allow --auth-keys --model-opt; do
	grep -qF -- "${opt//-/\\-}" "$dest$(abs "$MANDIR")/man8/batchwire.8" || fail "batchwire.8 does not mention $opt"
done
grep -q "top" "$dest$(abs "$MANDIR")/man1/bwcli.1" || fail "bwcli.1 does not mention top"
echo "man pages: batchwire.8 has the options, bwcli.1 its commands"
if ! command -v systemd-analyze >/dev/null; then
	echo "SKIP: systemd-analyze is not installed: the unit was not verified (apt install systemd)"
	exit 77
fi
systemd-analyze verify --man=no "$BUILD/deploy/batchwire-build.service" || fail "systemd-analyze verify refused the unit"
echo "PASS: systemd-analyze verify accepts the unit; the install layout is docs/deploy.md's"
