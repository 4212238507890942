#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The per-lcore rate limits bite at their configured rates, judged by counters: bursts of bad
requests (error replies), ICMP echo requests and ARP requests far above the daemon's
error_reply_rate, icmp_rate and arp_rate. Each burst must be fully accounted for (answered +
dropped by its rate = sent), something must have been dropped, and no more may have been answered
than the bucket's burst (a tenth of the rate, plus one) and the rate over the time the burst took
allow. The time is only an upper bound of the sender's, never asserted on its own."""
import argparse
import json
import socket
import struct
import subprocess
import sys
import time

from scapy.all import ARP, ICMP, IP, Ether, Raw, get_if_hwaddr, sendp, srp1  # noqa: E402

MAGIC = 0x52495742
HDR = struct.Struct("<IBBHQIIBBHIHHI")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iface", required=True)
    ap.add_argument("--server-ip", required=True)
    ap.add_argument("--client-ip", required=True)
    ap.add_argument("--port", type=int, default=7878)
    ap.add_argument("--error-rate", type=int, required=True)
    ap.add_argument("--icmp-rate", type=int, required=True)
    ap.add_argument("--arp-rate", type=int, required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--telemetry", required=True)
    args = ap.parse_args()
    n = args.count

    def stats():
        return json.loads(subprocess.check_output(args.telemetry, shell=True))["/batchwire/stats"]

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((args.client_ip, 0))
    sock.setblocking(False)
    server = (args.server_ip, args.port)
    # version 9: an error reply each (INVALID_ARGUMENT), refused as it arrives
    bad = HDR.pack(MAGIC, 9, 1, 0, 7, 0, 0, 0, 0, 0, 16, 0, 1, 16) + b"\0" * 16
    sock.sendto(bad, server)  # the client kernel resolves the server's MAC before the count starts
    time.sleep(0.3)
    arp = srp1(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=args.server_ip, psrc=args.client_ip),
               iface=args.iface, timeout=2, verbose=False)
    if arp is None:
        print("FAIL: no ARP reply")
        return 1
    mac = arp[ARP].hwsrc
    our = get_if_hwaddr(args.iface)
    icmp = [bytes(Ether(src=our, dst=mac) / IP(src=args.client_ip, dst=args.server_ip) / ICMP(id=7, seq=i) /
                  Raw(b"r" * 16)) for i in range(n)]
    arps = [bytes(Ether(src=our, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=args.server_ip, psrc=args.client_ip))
            for _ in range(n)]
    time.sleep(1.0)  # every bucket full again

    failures = 0

    def check(name, sent, answered, dropped, rate, seconds):
        nonlocal failures
        allowed = rate // 10 + 1 + rate * seconds
        ok = answered + dropped == sent and dropped > 0 and answered <= allowed
        print("%-12s sent %5d answered %5d dropped %5d (rate %d/s over %.2f s allows %.0f) %s" %
              (name, sent, answered, dropped, rate, seconds, allowed, "ok" if ok else "MISMATCH"))
        failures += not ok

    before = stats()
    t0 = time.monotonic()
    for _ in range(n):
        sock.sendto(bad, server)
    t_err = time.monotonic() - t0
    t0 = time.monotonic()
    sendp(icmp, iface=args.iface, verbose=False)
    t_icmp = time.monotonic() - t0
    t0 = time.monotonic()
    sendp(arps, iface=args.iface, verbose=False)
    t_arp = time.monotonic() - t0
    time.sleep(0.5)
    after = stats()

    def delta(group, key=None):
        return (after[group][key] - before[group][key]) if key else after[group] - before[group]

    # the burst's time, and what the af_packet ring may still have held after it: half a second
    check("error reply", n, delta("replies_by_status", "INVALID_ARGUMENT"),
          delta("drops_by_reason", "rate_error_reply"), args.error_rate, t_err + 0.5)
    check("icmp echo", n, delta("icmp_echo_replies"), delta("drops_by_reason", "rate_icmp"), args.icmp_rate,
          t_icmp + 0.5)
    # the client kernel may ARP for the server on its own meanwhile: a reply more or less
    arp_answered, arp_dropped = delta("arp_replies"), delta("drops_by_reason", "rate_arp")
    extra = arp_answered + arp_dropped - n
    if 0 <= extra <= 3:
        arp_answered -= extra
    check("arp", n, arp_answered, arp_dropped, args.arp_rate, t_arp + 0.5)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
