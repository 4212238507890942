#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Attacks on the HTTP control server by a client that holds no key, each followed by a check that a
good client (or an orchestrator's probe) is still answered. Run beside batchwire (its namespace):

  large:   8 parallel POSTs declaring 128 MiB bodies: each answered 413 within 1 s, the daemon's
           RSS growing by less than 256 MiB; then a chunked body (no Content-Length) of 8 MiB and a
           JSON of 100,000 values within the byte limit: 413 each;
  slow:    64 connections that send their headers a byte at a time: /v2/health/live and /metrics
           on the probe listener answered within 1 s meanwhile;
  bodies:  as many slow POST bodies as there are inference slots, a byte every 0.5 s: a good
           request meanwhile waits and gets 503, the slow ones are cut off, and a good request after
           is answered 200.

Exit status 0 when every check held; each prints one line.
"""
import argparse
import json
import socket
import sys
import threading
import time

ok = True


def check(what, good):
    global ok
    print(f"  {what}: {'ok' if good else 'WRONG'}")
    ok &= bool(good)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def read_status(sock, timeout):
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionError):
        pass
    try:
        return int(data.split(b" ")[1])
    except (IndexError, ValueError):
        return 0


def get(port, path, timeout=1.0):
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: bw\r\nConnection: close\r\n\r\n".encode())
        code = read_status(s, timeout)
        s.close()
    except OSError:
        code = 0
    return code, time.monotonic() - t0


def mlp_body(rows=1):
    return json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [rows, 784],
                                   "data": [0.25] * (784 * rows)}]}).encode()


def post(port, path, body, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: bw\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    code = read_status(s, timeout)
    s.close()
    return code


def large(args):
    before = rss_kib(args.pid)
    results = []

    def one():
        t0 = time.monotonic()
        try:
            s = socket.create_connection(("127.0.0.1", args.port), timeout=5)
            s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: bw\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 134217728\r\n\r\n")
            try:
                s.sendall(b"[" + b"0," * (1 << 19))  # the start of the body, as a client would send it
            except OSError:
                pass  # the server answered and closed first
            code = read_status(s, 5)
            s.close()
        except OSError:
            code = 0
        results.append((code, time.monotonic() - t0))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    growth = (rss_kib(args.pid) - before) / 1024
    check(f"8 POSTs declaring 128 MiB: codes {sorted(c for c, _ in results)}, slowest {max(d for _, d in results):.2f} s",
          all(c == 413 and d < 1.0 for c, d in results))
    check(f"the daemon's RSS grew {growth:.1f} MiB (under 256)", growth < 256)

    # chunked: no Content-Length to refuse at the headers; the buffering stops at the model's limit
    before = rss_kib(args.pid)
    s = socket.create_connection(("127.0.0.1", args.port), timeout=10)
    s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: bw\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"0," * (1 << 16)
    try:
        for _ in range(64):  # 8 MiB
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        s.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    code = read_status(s, 10)
    s.close()
    growth = (rss_kib(args.pid) - before) / 1024
    check(f"a chunked body of 8 MiB: {code}, RSS grew {growth:.1f} MiB", code == 413 and growth < 64)

    # within the byte limit, but far more values than the MLP's inputs hold
    body = b'{"inputs":[{"name":"input","datatype":"FP32","shape":[1,784],"data":[' + b"0," * 100000 + b'0]}]}'
    code = post(args.port, "/v2/models/mlp/infer", body)
    check(f"a JSON of 100,000 values ({len(body)} bytes): {code}", code == 413)
    code = post(args.port, "/v2/models/mlp/infer", mlp_body())
    check(f"a good request after: {code}", code == 200)


def slow(args):
    conns = []
    for _ in range(64):
        try:
            conns.append(socket.create_connection(("127.0.0.1", args.port), timeout=2))
        except OSError:
            break
    head = b"GET /v2/health/live HTTP/1.1\r\nHost: bw\r\n"
    check(f"{len(conns)} slow connections opened to the main listener", len(conns) > 0)
    worst = 0.0
    codes = []
    for i in range(6):  # 3 s: a byte per connection every 0.5 s
        for c in conns:
            try:
                c.send(head[i:i + 1])
            except OSError:
                pass
        for path in ("/v2/health/live", "/metrics"):
            code, took = get(args.probe_port, path)
            codes.append(code)
            worst = max(worst, took)
        time.sleep(0.5)
    check(f"the probe listener meanwhile: codes {sorted(set(codes))}, slowest {worst:.3f} s",
          all(c == 200 for c in codes) and worst < 1.0)
    for c in conns:
        c.close()


def bodies(args):
    body = mlp_body()
    slow_conns = []
    for _ in range(args.slots):
        s = socket.create_connection(("127.0.0.1", args.port), timeout=10)
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: bw\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        slow_conns.append(s)
    stop = threading.Event()

    def dribble():
        i = 0
        while not stop.is_set() and i < len(body):
            for s in slow_conns:
                try:
                    s.send(body[i:i + 1])
                except OSError:
                    pass
            i += 1
            time.sleep(0.5)

    t = threading.Thread(target=dribble)
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    code = post(args.port, "/v2/models/mlp/infer", body)
    check(f"a good request while {args.slots} slow bodies hold every slot: {code} after {time.monotonic() - t0:.2f} s",
          code == 503)
    cut = [read_status(s, 6) for s in slow_conns]  # cut off: no status line, the connection closed
    stop.set()
    t.join()
    check(f"the slow bodies cut off (no answer, connection closed): {cut}", all(c == 0 for c in cut))
    code = post(args.port, "/v2/models/mlp/infer", body)
    check(f"a good request after: {code}", code == 200)
    for s in slow_conns:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("attack", choices=["large", "slow", "bodies"])
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--probe-port", type=int, default=8002)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--slots", type=int, default=4)
    args = ap.parse_args()
    {"large": large, "slow": slow, "bodies": bodies}[args.attack](args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
