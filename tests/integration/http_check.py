#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The HTTP control server, read by clients nobody here wrote: tritonclient.http (liveness,
readiness, server and model metadata, inference in JSON and binary tensors against bwrun's outputs)
and prometheus_client's text-format parser (every metric family of a scrape taken after load). Run
where the server's management address is reachable."""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np

import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", default="127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", required=True, help="NAME:DATATYPE:SHAPE;... the model's inputs as expected")
    ap.add_argument("--outputs", required=True)
    ap.add_argument("--min-requests", type=int, required=True, help="OK requests the model has answered by now")
    ap.add_argument("--bwrun", help="bwrun, to run --model-file on the same inputs as the HTTP requests")
    ap.add_argument("--model-file", help="the model's ONNX file (with --bwrun: inference is checked)")
    ap.add_argument("--batch-sizes", default="1,4", help="rows of the requests checked against bwrun")
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

    http_infers = infer_checks(c, args, check) if args.bwrun else 0

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
    if http_infers:
        got = samples.get(("batchwire_http_infer_requests_total", (("code", "200"),)), 0)
        check("HTTP inference answered 200: %d, at least %d" % (got, http_infers), got >= http_infers)
        bad = samples.get(("batchwire_http_infer_requests_total", (("code", "400"),)), 0)
        check("HTTP inference answered 400: %d (the refused shape)" % bad, bad >= 1)
    return 1 if failures else 0


def bwrun_case(bwrun, model_file, rows, seed, workdir):
    """bwrun's inputs and outputs at this batch: {name: array} each."""
    d = os.path.join(workdir, "b%d_s%d" % (rows, seed))
    os.makedirs(d, exist_ok=True)
    subprocess.run([bwrun, "--batch", str(rows), "--seed", str(seed), "--save-inputs", d, "--output-dir", d, model_file],
                   check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    return {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy")}


def infer_checks(c, args, check):
    """POST /v2/models/NAME/infer through tritonclient: JSON and binary tensors, outputs equal to bwrun's
    at the same batch size; requests at once; a refused shape. \return the requests answered OK."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    meta = c.get_model_metadata(args.model)
    in_names = [t["name"] for t in meta["inputs"]]
    out_names = [t["name"] for t in meta["outputs"]]
    answered = 0

    def request(arrays, binary):
        inputs = []
        for name in in_names:
            a = arrays[name]
            t = httpclient.InferInput(name, list(a.shape), {"float32": "FP32", "int64": "INT64", "int32": "INT32"}[str(a.dtype)])
            t.set_data_from_numpy(a, binary_data=binary)
            inputs.append(t)
        outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in out_names]
        return inputs, outputs

    with tempfile.TemporaryDirectory() as work:
        for rows in [int(b) for b in args.batch_sizes.split(",")]:
            ref = bwrun_case(args.bwrun, args.model_file, rows, 7 + rows, work)
            for binary in (False, True):
                inputs, outputs = request(ref, binary)
                r = c.infer(args.model, inputs, outputs=outputs, request_id="r%d" % rows)
                same = all(np.array_equal(r.as_numpy(n), ref[n]) for n in out_names)
                check("infer %d rows, %s tensors: outputs equal bwrun's" % (rows, "binary" if binary else "JSON"),
                      same and r.get_response()["model_name"] == args.model)
                answered += 1
        # eight at once: they may share a batch (rows computed together agree within float rounding)
        ref = bwrun_case(args.bwrun, args.model_file, 1, 99, work)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            def one(_):
                cc = httpclient.InferenceServerClient(url=args.url)
                inputs, outputs = request(ref, True)
                return cc.infer(args.model, inputs, outputs=outputs)
            results = list(pool.map(one, range(16)))
        worst = max(float(np.max(np.abs(r.as_numpy(n) - ref[n])) / max(float(np.max(np.abs(ref[n]))), 1e-30))
                    for r in results for n in out_names)
        check("16 requests, 8 at a time: every output within 1e-5 of bwrun's (worst %.2g)" % worst, worst <= 1e-5)
        answered += len(results)
        # a shape the model does not take: 400 with the reason
        bad = {n: (np.zeros((1, 3), np.float32) if i == 0 else ref[n]) for i, n in enumerate(in_names)}
        inputs, outputs = request(bad, False)
        try:
            c.infer(args.model, inputs, outputs=outputs)
            check("a wrong shape is refused", False)
        except InferenceServerException as e:
            check("a wrong shape is refused (%s)" % str(e)[:70], "shape" in str(e))
    return answered


if __name__ == "__main__":
    sys.exit(main())
