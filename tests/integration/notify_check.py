#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""batchwire under systemd's notify protocol, without systemd: this script is the manager. It binds
the datagram socket NOTIFY_SOCKET names, starts batchwire on a net_null port with WATCHDOG_USEC set
(as systemd does for a unit with Type=notify and WatchdogSec=2), and checks what it is told: a
STATUS while the models load, READY=1 once serving, a STATUS with the reply rate and WATCHDOG=1
every second, STOPPING=1 after SIGTERM, then exit 0.

Usage: notify_check.py BATCHWIRE MODELS_DIR"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def main():
    batchwire, models = sys.argv[1], sys.argv[2]
    mlp = os.path.join(models, "mlp.onnx")
    if not os.path.exists(mlp):
        print("SKIP: %s is missing (the models/ targets need python3 with onnx and numpy)" % mlp)
        return 77
    work = tempfile.mkdtemp(prefix="bw-notify-")
    path = os.path.join(work, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="2000000", OPENBLAS_NUM_THREADS="1")
    env.pop("WATCHDOG_PID", None)
    log = open(os.path.join(work, "batchwire.log"), "w+")
    proc = subprocess.Popen([batchwire, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", "bw-notify-%d" % os.getpid(),
                             "-l", "0-1", "--vdev", "net_null0", "--", "--ip", "10.99.0.1", "--http", "off",
                             "--model", "mlp=" + mlp, "--model-opt", "mlp.max_batch_size=4"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    got = []  # (seconds since start, message)
    start = time.time()
    sent_term = None

    def receive(until):
        while time.time() < until:
            try:
                data = sock.recv(4096).decode()
            except socket.timeout:
                if proc.poll() is not None:
                    return
                continue
            got.append((time.time() - start, data))

    deadline = start + 60
    while time.time() < deadline and not any("READY=1" in m for _, m in got) and proc.poll() is None:
        receive(time.time() + 0.2)
    ready_at = next((t for t, m in got if "READY=1" in m), None)
    if ready_at is not None:
        receive(time.time() + 2.5)  # two seconds of serving: STATUS and WATCHDOG each second
        proc.send_signal(signal.SIGTERM)
        sent_term = time.time() - start
        receive(time.time() + 10)
    try:
        rc = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "killed"
    log.seek(0)
    for t, m in got:
        print("  %6.2f s  %s" % (t, m.replace("\n", " | ")))
    failures = []

    def check(what, cond):
        print("  %-66s %s" % (what, "ok" if cond else "MISMATCH"))
        if not cond:
            failures.append(what)

    check("a STATUS while the models load, before READY=1",
          ready_at is not None and any(t < ready_at and "STATUS=loading" in m for t, m in got))
    check("READY=1 once serving", ready_at is not None)
    serving = [(t, m) for t, m in got if ready_at is not None and t > ready_at and (sent_term is None or t < sent_term)]
    check("STATUS with the reply rate while serving", any("STATUS=serving:" in m and "replies/s" in m for _, m in serving))
    check("WATCHDOG=1 at least once a second while serving", sum("WATCHDOG=1" in m for _, m in serving) >= 2)
    check("STOPPING=1 after SIGTERM", sent_term is not None and any(t >= sent_term and "STOPPING=1" in m for t, m in got))
    check("exit 0 (%s)" % rc, rc == 0)
    if failures:
        print("--- batchwire log ---")
        print(log.read()[-3000:])
    os.unlink(path)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
