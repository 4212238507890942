#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The layers, as the build enforces them (docs/architecture.md, "Layers").

    layers.py BUILD_DIR

For one source file of each module, compiles `#include "HEADER"` with that file's own flags (from
BUILD_DIR/compile_commands.json): every header the module may use must be found, and every other
module's internal header, and every public header of a module above it, must not be. Exit status 0
when the include graph is as documented, 1 otherwise (each violation named), 77 (meson's SKIP)
without a compiler database.
"""

import json
import os
import shlex
import subprocess
import sys

SKIP = 77

# Internal headers of each module: nobody else may include them. (A module's own "defs.h" is found
# first by its own sources, so that name says nothing here; the others are unique.)
INTERNAL = {
    "platform": [],
    "batching": [],
    "dataplane": [],
    "runtime": ["kernels/fused.h", "kernels/kernels.h", "kernels/sgemm.h", "exec/defs.h", "opt/defs.h",
                "onnx_load.h", "onnx_defs.h"],
    "gpu": ["cuda_defs.h", "fake_defs.h", "doorbell.h"],
    "gpuhost": ["lower.h", "compile_defs.h"],
    "client": ["bwcli.h"],
}

# Public headers, by module, in layer order (a module may use those of the modules it depends on).
PUBLIC = {
    "batchwire": ["batchwire/batch.h", "batchwire/wire.h", "batchwire/half.h", "batchwire/clock.h"],
    "platform": ["platform.h"],
    "batching": ["batching.h"],
    "dataplane": ["dataplane.h"],
    "gpu": ["gpu.h", "program.h", "program_math.h", "fake.h"],
    "runtime": ["runtime.h", "graph.h", "exec/plan.h", "exec/executor.h", "fused_ops.h"],
    "gpuhost": ["host.h"],
    "client": ["bwclient.h"],
    "app": ["service.h", "config.h"],
}

# module: (a source file of it, the modules whose public headers it may include)
MODULES = {
    "platform": ("platform/thread.c", ["batchwire"]),
    "batching": ("batching/queue.c", ["batchwire"]),
    "dataplane": ("dataplane/request.c", ["batchwire", "platform"]),
    "gpu": ("gpu/loader.c", ["batchwire"]),
    "runtime": ("runtime/model.c", ["batchwire"]),
    "gpuhost": ("gpu/host/lower.c", ["batchwire", "gpu", "runtime"]),
    "client": ("client/codec.c", ["batchwire"]),
    "app": ("app/models.c", ["batchwire", "platform", "batching", "dataplane", "runtime", "gpu", "gpuhost"]),
}


def flags(db, src):
    for entry in db:
        if entry["file"].endswith(src):
            args = shlex.split(entry["command"])
            keep, i = [], 1
            while i < len(args):
                a = args[i]
                if a in ("-include", "-I"):
                    keep += [a, args[i + 1]]
                    i += 2
                    continue
                if a.startswith(("-I", "-D", "-std", "-m")):
                    keep.append(a)
                i += 1
            return keep, entry["directory"]
    return None, None


def compiles(fl, cwd, header):
    r = subprocess.run(["cc", "-fsyntax-only", "-x", "c", "-"] + fl, input='#include "%s"\n' % header,
                       capture_output=True, text=True, cwd=cwd)
    return r.returncode == 0


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = os.path.join(sys.argv[1], "compile_commands.json")
    if not os.path.exists(path):
        print(f"SKIP: no {path}")
        return SKIP
    db = json.load(open(path))
    bad = 0
    for mod, (src, uses) in MODULES.items():
        fl, cwd = flags(db, src)
        if fl is None:
            print(f"FAIL: {src} is not in the compiler database")
            bad += 1
            continue
        allowed = [h for m in uses + [mod] for h in PUBLIC.get(m, [])]
        refused = [h for m, hs in INTERNAL.items() if m != mod for h in hs]
        refused += [h for m, hs in PUBLIC.items() if m not in uses and m != mod for h in hs]
        for h in allowed:
            if not compiles(fl, cwd, h):
                print(f"FAIL: {mod} ({src}) cannot include {h}, which it may use")
                bad += 1
        for h in refused:
            if compiles(fl, cwd, h):
                print(f"FAIL: {mod} ({src}) can include {h}: another module's internals, or a layer above it")
                bad += 1
        print(f"{mod:10s} may include {len(allowed)} public headers; {len(refused)} others refused as they should be"
              if bad == 0 else f"{mod:10s} checked")
    print("the include graph is as documented" if bad == 0 else f"{bad} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
