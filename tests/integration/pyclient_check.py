#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The Python client (client/python, installed into a temporary directory by pip from the tree) against
a running batchwire: PING (and its DRAINING flag off), MODEL_INFO, INFER of the MLP equal to bwrun's
outputs on the same inputs (1 and 4 rows, by name and by index), the echo model's round trip of
several dtypes, ResNet-50's 602 KB request in segments and its reply, signed requests with a key file
(and refused with the wrong key), the server's refusals as BatchwireError with the status, and a Pool
of an address nobody answers on and the server: requests fail over and stay away from the dead one.

Usage: pyclient_check.py --site DIR --host IP --mtu N --bwrun PATH --models DIR --key-file F --key-id N
       --bad-key-file F"""
import argparse
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    for a in ("--site", "--host", "--bwrun", "--models", "--key-file", "--bad-key-file"):
        ap.add_argument(a, required=True)
    ap.add_argument("--mtu", type=int, required=True)
    ap.add_argument("--key-id", type=int, required=True)
    args = ap.parse_args()
    sys.path.insert(0, args.site)
    import numpy as np
    import batchwire
    from batchwire import BatchwireError, Client

    failures = []

    def check(what, cond):
        print("  %-74s %s" % (what, "ok" if cond else "MISMATCH"))
        if not cond:
            failures.append(what)

    check("imported from the pip-installed copy (%s)" % batchwire.__file__, batchwire.__file__.startswith(args.site))
    c = Client(args.host, mtu=args.mtu, timeout=2.0)
    rtt = c.ping(b"hello")
    check("PING: %.0f us, not draining" % (rtt * 1e6), rtt > 0 and not c.draining)
    info = c.model_info("mlp")
    check("MODEL_INFO mlp: %r" % info, info.inputs[0].name == "input" and info.inputs[0].dims == [0, 784]
          and info.outputs[0].name == "logits" and info.outputs[0].dims == [0, 10])

    with tempfile.TemporaryDirectory() as work:
        for rows in (1, 4):
            d = os.path.join(work, "b%d" % rows)
            os.makedirs(d)
            subprocess.run([args.bwrun, "--batch", str(rows), "--seed", str(rows + 3), "--chunk", "off",
                            "--save-inputs", d, "--output-dir", d, os.path.join(args.models, "mlp.onnx")],
                           check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
            x, want = np.load(os.path.join(d, "input.npy")), np.load(os.path.join(d, "logits.npy"))
            by_name = c.infer("mlp", {"input": x})["logits"]
            by_index = c.infer("mlp", [x])["logits"]
            worst = float(np.max(np.abs(by_name - want)) / np.max(np.abs(want)))
            check("INFER mlp, %d rows, by name and by index: bwrun's logits (worst %.2g)" % (rows, worst),
                  by_name.shape == (rows, 10) and worst <= 1e-5 and np.array_equal(by_name, by_index))

    ins = {"f": np.arange(12, dtype=np.float32).reshape(3, 4), "i": np.array([[2 ** 62], [-5], [7]], np.int64),
           "b": np.array([[True, False]] * 3), "h": np.full((3, 2), 1.5, np.float16)}
    out = c.infer("echo", ins)
    check("INFER echo: float32, int64 past 2^53, bool, float16 come back equal",
          all(np.array_equal(out[k], v) and out[k].dtype == v.dtype for k, v in ins.items()))

    r50 = c.model_info("resnet50")
    image = np.random.default_rng(5).random((1, 3, 224, 224), dtype=np.float32)
    logits = c.infer("resnet50", {r50.inputs[0].name: image})[r50.outputs[0].name]
    segments = -(-(image.nbytes + 64) // c.slice)
    check("INFER resnet50: a 602 KB request in %d segments, logits %s" % (segments, logits.shape),
          logits.shape == (1, 1000) and np.all(np.isfinite(logits)))

    try:
        c.infer("mlp", {"input": np.zeros((1, 783), np.float32)})
        check("a wrong shape is refused", False)
    except BatchwireError as e:
        check("a wrong shape: BatchwireError %s (%s)" % (e.status_name, e.message[:50]),
              e.status_name == "INVALID_ARGUMENT" and "shape" in e.message)
    try:
        c.model_info("no_such_model")
        check("an unknown model is refused", False)
    except BatchwireError as e:
        check("an unknown model: BatchwireError %s" % e.status_name, e.status_name == "NOT_FOUND")

    s = Client(args.host, mtu=args.mtu, timeout=2.0, key_file=args.key_file, key_id=args.key_id)
    s.ping(bytes(3000))
    x = np.random.default_rng(9).random((2, 784), dtype=np.float32)
    signed = s.infer("mlps", {"input": x})["logits"]
    plain = c.infer("mlp", {"input": x})["logits"]
    check("signed (key %d): PING of 3000 bytes in segments; INFER mlps (auth = required) = mlp's" % args.key_id,
          np.array_equal(signed, plain))
    try:
        c.infer("mlps", {"input": x})
        check("unsigned INFER of a model with auth = required is refused", False)
    except BatchwireError as e:
        check("unsigned requests to mlps (auth = required): %s" % e.status_name, e.status_name == "UNAUTHENTICATED")
    bad = Client(args.host, mtu=args.mtu, timeout=2.0, key_file=args.bad_key_file)
    try:
        bad.infer("mlps", {"input": x})
        check("a key the server does not have is refused", False)
    except BatchwireError as e:
        check("a key the server does not have: %s" % e.status_name, e.status_name == "UNAUTHENTICATED")

    # a pool of a server that is not there and the real one: requests fail over and stay away
    from batchwire import Pool
    dead = args.host.rsplit(".", 1)[0] + ".99"
    pool = Pool([dead, args.host], timeout=0.3, mtu=args.mtu)
    x = np.random.default_rng(11).random((1, 784), dtype=np.float32)
    answers = [pool.infer("mlp", {"input": x})["logits"] for _ in range(5)]
    check("pool [%s (nobody), %s]: 5 requests answered, the dead one tried once, set aside" % (dead, args.host),
          all(np.array_equal(a, answers[0]) for a in answers) and pool.servers[0]["failed"] == 1
          and pool.servers[1]["answered"] == 5)
    # a server that takes the request and never answers: the next one gets it with the same request_id
    import socket, struct as st
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    sink.settimeout(2)
    quiet = "127.0.0.1:%d" % sink.getsockname()[1]
    pool2 = Pool([quiet, args.host], timeout=0.3, mtu=args.mtu)
    # the quiet one's client knows the model already (else its MODEL_INFO, not the INFER, would time out)
    pool2._client(0)._models["mlp"] = pool2._client(1).model_info("mlp")
    pool2.infer("mlp", {"input": x})
    seen = []
    while True:
        try:
            d = sink.recv(65536)
        except socket.timeout:
            break
        if len(d) >= 40 and d[5] == 2:  # INFER
            seen.append(st.unpack_from("<Q", d, 8)[0])
    real = pool2._client(1).last_request_id
    check("pool [quiet %s, %s]: the INFER the quiet one took came to %s with its request_id (%s)"
          % (quiet, args.host, args.host, seen), seen == [real])
    health = pool.check()
    check("pool.check(): %s" % health, health == [(dead + ":7878", False), (args.host + ":7878", True)])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
