#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Signed requests probed from the client namespace, signed here with Python's hmac (not the
client library): the right key, a replay of the same datagram, a wrong secret, an unknown key id,
a request_id far from the server's clock, an unsigned request to a model that requires signing,
the same signed bytes from another source port, an unpadded signed MODEL_INFO. Each must get its
status, and /batchwire/stats' auth_by_outcome must rise by exactly what was sent."""
import argparse
import hashlib
import hmac
import json
import socket
import struct
import subprocess
import sys
import time

MAGIC = 0x52495742
HDR = struct.Struct("<IBBHQIIBBHIHHI")  # docs/protocol.md "Header (40 bytes)"
OK, UNAUTHENTICATED = 0, 7
PING, INFER, MODEL_INFO = 1, 2, 3
FLAG_AUTH = 1


def header(opcode, request_id, body_len, model_id=0, flags=0, num_tensors=0):
    return HDR.pack(MAGIC, 1, opcode, 0, request_id, model_id, 0, 0, flags, num_tensors, body_len, 0, 1, body_len)


def float_tensor(values):
    # descriptor (48 bytes): index 0, FLOAT, rank 2, no name, dims [1, n]
    desc = struct.pack("<HBBHHII", 0, 1, 2, 0, 0, 4 * len(values), 0) + struct.pack("<8I", 1, len(values), *[0] * 6)
    return desc + struct.pack("<%df" % len(values), *values)


def signed(sock, server, opcode, body, key_id, secret, request_id, model_id=0, num_tensors=0):
    src_ip, src_port = sock.getsockname()
    pseudo = (socket.inet_aton(src_ip) + socket.inet_aton(server[0]) + struct.pack("!HH", src_port, server[1]))
    msg = header(opcode, request_id, len(body), model_id, FLAG_AUTH, num_tensors) + body + struct.pack("<II", key_id, 0)
    tag = hmac.new(secret, pseudo + msg, hashlib.sha256).digest()
    return msg + tag


def exchange(sock, server, datagram):
    sock.sendto(datagram, server)
    reply = sock.recv(65536)
    fields = HDR.unpack(reply[:40])
    return fields[3], reply[40:40 + fields[10]]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--server-ip", required=True)
    ap.add_argument("--client-ip", required=True)
    ap.add_argument("--port", type=int, default=7878)
    ap.add_argument("--key-id", type=int, required=True)
    ap.add_argument("--key-hex", required=True)
    ap.add_argument("--telemetry", required=True, help="command printing /batchwire/stats as JSON")
    args = ap.parse_args()
    server = (args.server_ip, args.port)
    secret = bytes.fromhex(args.key_hex)
    wrong = bytes(b ^ 0x55 for b in secret)

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((args.client_ip, 0))
    sock.settimeout(2)
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    other.bind((args.client_ip, 0))
    other.settimeout(2)

    def now_ns():
        return time.time_ns()

    def stats():
        return json.loads(subprocess.check_output(args.telemetry, shell=True))["/batchwire/stats"]["auth_by_outcome"]

    before = stats()
    failures = 0
    expected = {}

    def case(name, datagram, want_status, outcome, want_text=None, via=sock):
        nonlocal failures
        status, body = exchange(via, server, datagram)
        ok = status == want_status and (want_text is None or want_text.encode() in body)
        print("%-52s status %d (want %d) %s%s" % (name, status, want_status, "ok" if ok else "MISMATCH",
                                                   "" if ok else " body=%r" % body[:120]))
        failures += not ok
        if outcome:
            expected[outcome] = expected.get(outcome, 0) + 1
        return body

    ping = signed(sock, server, PING, b"signed ping", args.key_id, secret, now_ns())
    body = case("signed PING", ping, OK, "ok")
    if body != b"signed ping":
        print("PING echo differs: %r" % body)
        failures += 1
    case("the same datagram again (a replay)", ping, UNAUTHENTICATED, "replay", "already seen")
    case("the same bytes from another source port", ping, UNAUTHENTICATED, "bad_tag", "does not match", via=other)
    case("a wrong secret", signed(sock, server, PING, b"x", args.key_id, wrong, now_ns()), UNAUTHENTICATED,
         "bad_tag")
    case("an unknown key id", signed(sock, server, PING, b"x", args.key_id + 1000, secret, now_ns()),
         UNAUTHENTICATED, "unknown_key")
    case("request_id a minute behind the server's clock",
         signed(sock, server, PING, b"x" * 200, args.key_id, secret, now_ns() - 60 * 10**9), UNAUTHENTICATED,
         "stale", "auth_window_ms")
    tensor = float_tensor([1.5, -2.0, 3.25, 4.0])
    unsigned_infer = header(INFER, 43, len(tensor), num_tensors=1) + tensor
    case("an unsigned INFER to echo (auth = required)", unsigned_infer, UNAUTHENTICATED, "missing")
    body = case("a signed INFER to echo",
                signed(sock, server, INFER, tensor, args.key_id, secret, now_ns(), num_tensors=1), OK, "ok")
    if body != tensor:
        print("echo reply differs from the request's tensor")
        failures += 1
    info = case("a signed MODEL_INFO, not padded", signed(sock, server, MODEL_INFO, b"", args.key_id, secret,
                                                          now_ns()), OK, "ok")
    if len(info) <= 24:
        print("MODEL_INFO body of %d bytes: no description" % len(info))
        failures += 1
    case("an unsigned, unpadded MODEL_INFO of echo", header(MODEL_INFO, 44, 0), UNAUTHENTICATED, "missing")

    after = stats()
    for key in sorted(after):
        delta = after[key] - before.get(key, 0)
        want = expected.get(key, 0)
        ok = delta == want
        if delta or want:
            print("auth_by_outcome %-12s sent %3d counted %3d %s" % (key, want, delta, "ok" if ok else "MISMATCH"))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
