#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The Grafana dashboard names only metrics batchwire exports: every batchwire_* name in its
queries (panels and template variables) must be a sample name of a live /metrics scrape, with the
labels the query filters or groups by present on it."""
import argparse
import json
import re
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

NAME = re.compile(r"\bbatchwire_[a-z0-9_]+")
LABELS = re.compile(r"(batchwire_[a-z0-9_]+)\{([^}]*)\}")
BY = re.compile(r"by \(([^)]*)\)")


def exprs(dash):
    for p in dash["panels"]:
        for t in p.get("targets", []):
            yield p["title"], t["expr"]
    for v in dash.get("templating", {}).get("list", []):
        yield "variable " + v["name"], v.get("query", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dashboard")
    ap.add_argument("--url", default="127.0.0.1:8000")
    args = ap.parse_args()
    dash = json.load(open(args.dashboard))
    text = urllib.request.urlopen("http://%s/metrics" % args.url, timeout=5).read().decode()
    labels_of = {}
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            labels_of.setdefault(s.name, set()).update(s.labels)
    failures = 0
    checked = 0
    for where, e in exprs(dash):
        for name in NAME.findall(e):
            checked += 1
            if name not in labels_of:
                print("MISSING %s in %s" % (name, where))
                failures += 1
        for name, sel in LABELS.findall(e):
            for label in re.findall(r"([a-z_]+)\s*(?:=~|!=|=)", sel):
                if label != "instance" and name in labels_of and label not in labels_of[name]:
                    print("MISSING label %s of %s in %s" % (label, name, where))
                    failures += 1
        grouped = set(l.strip() for g in BY.findall(e) for l in g.split(",")) - {"instance", "le"}
        names = set(NAME.findall(e))
        for label in grouped:
            if not any(label in labels_of.get(n, set()) for n in names):
                print("MISSING label %s grouped by in %s" % (label, where))
                failures += 1
    print("dashboard: %d panels, %d metric references, %d missing" % (len(dash["panels"]), checked, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
