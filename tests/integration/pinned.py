#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Requests pinned to one model version, one after another for a while, sorted by what came back.

Every INFER names version V of model ID in its model_id ((V << 16) + ID) and carries INPUT (a NumPy
file of the model's one input). An OK reply must carry V's outputs (WANT.npy, the first output),
never another version's (OTHER.npy): a reload while this runs must not answer for one version with
another. Refusals (NOT_FOUND once the version is replaced, UNAVAILABLE naming it) are fine.
Prints one line of counts; exit status 1 when an OK reply did not carry V's outputs.
"""
import argparse
import socket
import struct
import sys
import time

import numpy as np

MAGIC = 0x52495742
HDR = struct.Struct("<IBBHQIIBBHIHHI")  # include/batchwire/wire.h struct bw_hdr, 40 bytes
DESC = struct.Struct("<HBBHHII8I")      # struct bw_tensor_desc, 48 bytes
OP_INFER, OP_REPLY = 2, 0x80
NAMES = {0: "OK", 1: "INVALID_ARGUMENT", 2: "NOT_FOUND", 3: "RESOURCE_EXHAUSTED", 4: "DEADLINE_EXCEEDED",
         5: "UNAVAILABLE", 6: "INTERNAL", 7: "UNAUTHENTICATED"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--port", type=int, default=7878)
    ap.add_argument("--model-id", type=int, required=True)
    ap.add_argument("--version", type=int, required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--want", required=True, help="the version's first output (.npy)")
    ap.add_argument("--other", required=True, help="another version's first output (.npy)")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    x = np.load(args.input).astype(np.float32)
    want, other = np.load(args.want).astype(np.float32), np.load(args.other).astype(np.float32)
    dims = list(x.shape) + [0] * (8 - x.ndim)
    body = DESC.pack(0, 1, x.ndim, 0, 0, x.nbytes, 0, *dims) + x.tobytes()
    model_id = (args.version << 16) + args.model_id
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((args.server, args.port))
    sock.settimeout(1.0)
    counts, wrong, rid = {}, 0, int(time.time() * 1e9)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        rid += 1
        sock.send(HDR.pack(MAGIC, 1, OP_INFER, 0, rid, model_id, 0, 0, 0, 1, len(body), 0, 1, len(body)) + body)
        try:
            while True:
                reply = sock.recv(65535)
                h = HDR.unpack_from(reply)
                if h[4] == rid:
                    break
        except socket.timeout:
            counts["timeout"] = counts.get("timeout", 0) + 1
            continue
        status = NAMES.get(h[3], str(h[3]))
        if status == "OK":
            d = DESC.unpack_from(reply, 40)
            name_len = d[3]
            at = 40 + 48 + (name_len + 7) // 8 * 8
            got = np.frombuffer(reply[at:at + d[5]], dtype=np.float32).reshape(want.shape)
            # within bwcli --expect's tolerances: batches of other sizes round differently
            if np.allclose(got, want, rtol=1e-4, atol=1e-5):
                pass
            elif np.allclose(got, other, rtol=1e-4, atol=1e-5):
                status = "OK with the other version's outputs"
                wrong += 1
            else:
                status = "OK with outputs of neither version"
                wrong += 1
        counts[status] = counts.get(status, 0) + 1
    print(f"pinned to version {args.version}: {dict(sorted(counts.items()))}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
