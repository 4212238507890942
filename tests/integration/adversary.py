#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Attacks on reassembly from a peer that holds no key, sent over a plain UDP socket.

  claim:  one PING first segment claiming every reassembly mbuf of a core (12,740 segments at MTU
          1500), deadline 0xffffffff, then smaller claims (PING and INFER to every model id given);
  dead:   COUNT first segments of INFERs to a model id that does not exist, distinct request_ids
          (each refused once, each remembered by a dead entry), then COUNT malformed first segments
          (a total that the slices cannot make);
  flood:  COUNT one-datagram INFERs of one row to the echo model at each of PRIORITIES priority
          levels (each level's window its own), then one PING: prints the replies by status, and
          whether the PING was answered.

Prints one line per attack: what was sent and how many replies came back within a short wait.
"""
import argparse
import socket
import struct
import sys
import time

MAGIC = 0x52495742
HDR = struct.Struct("<IBBHQIIBBHIHHI")  # include/batchwire/wire.h struct bw_hdr, 40 bytes
assert HDR.size == 40
DESC = struct.Struct("<HBBHHII8I")  # struct bw_tensor_desc, 48 bytes
assert DESC.size == 48
OP_PING, OP_INFER, OP_REPLY = 1, 2, 0x80
STATUS_NAMES = {0: "OK", 1: "INVALID_ARGUMENT", 2: "NOT_FOUND", 3: "RESOURCE_EXHAUSTED", 4: "DEADLINE_EXCEEDED",
                5: "UNAVAILABLE", 6: "INTERNAL", 7: "UNAUTHENTICATED"}
SLICE_1500 = 1500 - 20 - 8 - 40


def segment(opcode, request_id, model_id, deadline_us, seg_index, seg_count, total, body, num_tensors=0):
    return HDR.pack(MAGIC, 1, opcode, 0, request_id, model_id, deadline_us, 0, 0, num_tensors, len(body),
                    seg_index, seg_count, total) + body


def drain(sock, wait_s):
    n = 0
    end = time.monotonic() + wait_s
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return n
        sock.settimeout(left)
        try:
            sock.recv(65535)
            n += 1
        except socket.timeout:
            return n


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("attack", choices=["claim", "dead", "flood"])
    ap.add_argument("--server", required=True)
    ap.add_argument("--port", type=int, default=7878)
    ap.add_argument("--segments", type=int, default=12740, help="claim: the first PING's seg_count")
    ap.add_argument("--model-ids", default="", help="claim: comma-separated model ids to claim INFERs for")
    ap.add_argument("--count", type=int, default=1024, help="dead: first segments of each kind; flood: INFERs a level")
    ap.add_argument("--priorities", type=int, default=1, help="flood: priority levels to send at")
    args = ap.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((args.server, args.port))
    body = bytes(SLICE_1500)
    rid = int(time.time() * 1e9)
    sent = 0
    if args.attack == "claim":
        n = args.segments
        sock.send(segment(OP_PING, rid, 0, 0xFFFFFFFF, 0, n, n * SLICE_1500, body))
        sent += 1
        for k in range(1, 8):
            sock.send(segment(OP_PING, rid + k, 0, 0xFFFFFFFF, 0, 40 * k, 40 * k * SLICE_1500, body))
            sent += 1
        for i, model in enumerate(int(m) for m in args.model_ids.split(",") if m):
            sock.send(segment(OP_INFER, rid + 100 + i, model, 0xFFFFFFFF, 0, 65535, 65535 * SLICE_1500, body, 1))
            sent += 1
    elif args.attack == "flood":
        data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
        body = DESC.pack(0, 1, 2, 0, 0, len(data), 0, 1, 4, 0, 0, 0, 0, 0, 0) + data
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        n = 0
        for level in range(args.priorities):
            for _ in range(args.count):
                hdr = bytearray(segment(OP_INFER, rid + n, 0, 0, 0, 1, len(body), body, 1))
                hdr[24] = level  # priority
                sock.send(bytes(hdr))
                n += 1
        ping_id = rid + n
        sock.send(segment(OP_PING, ping_id, 0, 0, 0, 1, 8, bytes(8)))
        by_status, ping_ok = {}, False
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            sock.settimeout(max(end - time.monotonic(), 0.001))
            try:
                reply = sock.recv(65535)
            except socket.timeout:
                break
            fields = HDR.unpack_from(reply)
            if fields[4] == ping_id and fields[2] == OP_PING | OP_REPLY:
                ping_ok = fields[3] == 0
                continue
            name = STATUS_NAMES.get(fields[3], str(fields[3]))
            by_status[name] = by_status.get(name, 0) + 1
        print(f"flood: sent {n} INFERs, replies {dict(sorted(by_status.items()))}, ping {'answered' if ping_ok else 'LOST'}")
        return 0 if ping_ok else 1
    else:
        for i in range(args.count):
            sock.send(segment(OP_INFER, rid + i, 0xFFFE, 0xFFFFFFFF, 0, 3, 3000, bytes(1000), 1))
            sent += 1
        for i in range(args.count):
            # slices of 1000 and a total of 2000: the last slice would be empty
            sock.send(segment(OP_INFER, rid + args.count + i, 0xFFFE, 0xFFFFFFFF, 0, 3, 2000, bytes(1000), 1))
            sent += 1
    print(f"{args.attack}: sent {sent} datagrams, {drain(sock, 0.5)} replies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
