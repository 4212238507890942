#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The HTTP control server, read by clients nobody here wrote: tritonclient.http (liveness,
readiness, server and model metadata) and prometheus_client's text-format parser (every metric
family of a scrape taken after load). Run where the server's management address is reachable."""
import argparse
import sys
import urllib.request

import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", default="127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", required=True, help="NAME:DATATYPE:SHAPE;... the model's inputs as expected")
    ap.add_argument("--outputs", required=True)
    ap.add_argument("--min-requests", type=int, required=True, help="OK requests the model has answered by now")
    args = ap.parse_args()
    failures = 0

    def check(what, cond):
        nonlocal failures
        print("  %-60s %s" % (what, "ok" if cond else "MISMATCH"))
        failures += not cond

    c = httpclient.InferenceServerClient(url=args.url)
    check("tritonclient: server live", c.is_server_live())
    check("tritonclient: server ready", c.is_server_ready())
    meta = c.get_server_metadata()
    check("server metadata names batchwire (%s %s)" % (meta.get("name"), meta.get("version")), meta.get("name") == "batchwire")
    check("model %s ready" % args.model, c.is_model_ready(args.model))
    m = c.get_model_metadata(args.model)

    def parse(spec):
        out = []
        for t in spec.split(";"):
            name, dtype, shape = t.split(":")
            out.append({"name": name, "datatype": dtype, "shape": [int(d) for d in shape.split(",")]})
        return out

    got_in = [{k: t[k] for k in ("name", "datatype", "shape")} for t in m["inputs"]]
    got_out = [{k: t[k] for k in ("name", "datatype", "shape")} for t in m["outputs"]]
    check("model inputs %s" % got_in, got_in == parse(args.inputs))
    check("model outputs %s" % got_out, got_out == parse(args.outputs))
    try:
        c.get_model_metadata("no_such_model")
        check("an unknown model is refused", False)
    except Exception as e:  # tritonclient raises InferenceServerException on 404
        check("an unknown model is refused (%s)" % str(e)[:60], "no model named" in str(e))

    text = urllib.request.urlopen("http://%s/metrics" % args.url, timeout=5).read().decode()
    families = list(text_string_to_metric_families(text))
    names = {f.name for f in families}
    check("prometheus_client parsed %d metric families" % len(families), len(families) > 20)
    for want in ("batchwire_requests", "batchwire_replies", "batchwire_drops", "batchwire_request_latency_seconds",
                 "batchwire_poll_busy_seconds", "batchwire_model_batches", "batchwire_ready"):
        check("family %s" % want, want in names)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    lat = [f for f in families if f.name == "batchwire_request_latency_seconds"][0]
    buckets = [(float(s.labels["le"]), s.value) for s in lat.samples
               if s.name.endswith("_bucket") and s.labels["model"] == args.model]
    count = samples[("batchwire_request_latency_seconds_count", (("model", args.model),))]
    check("latency histogram of %s: %d requests, at least %d" % (args.model, count, args.min_requests),
          count >= args.min_requests)
    check("its buckets rise and end at the count", all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
          and buckets[-1] == (float("inf"), count))
    # OpenMetrics, where asked: its own parser reads every family, counters named without _total
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
    req = urllib.request.Request("http://%s/metrics" % args.url,
                                 headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    resp = urllib.request.urlopen(req, timeout=5)
    om = list(om_families(resp.read().decode()))
    check("OpenMetrics: %s, %d families parsed" % (resp.headers["Content-Type"].split(";")[0], len(om)),
          resp.headers["Content-Type"].startswith("application/openmetrics-text") and len(om) == len(families))
    check("OpenMetrics: counter family batchwire_replies", any(f.name == "batchwire_replies" and f.type == "counter" for f in om))
    ok = samples[("batchwire_replies_total", (("status", "OK"),))]
    check("replies OK %d >= %d" % (ok, args.min_requests), ok >= args.min_requests)
    check("ready gauge 1", samples[("batchwire_ready", ())] == 1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
