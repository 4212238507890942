#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Bad-input barrage: crafted bad frames in named classes, sent from the client namespace.

Each class must raise exactly one batchwire counter (a drop reason, or error replies of one status)
by exactly the number of frames sent in it, and nothing else may be dropped. Run inside the client
namespace by barrage_netns.sh; it reads telemetry through the command given in --telemetry.
"""
import argparse
import json
import random
import socket
import struct
import subprocess
import sys
import time

from scapy.all import ARP, ICMP, IP, UDP, Ether, Raw, conf, get_if_hwaddr, sendp, srp1  # noqa: E402

conf.verb = 0
MAGIC = 0x52495742
HDR = struct.Struct("<IBBHQIIBBHIHHI")  # include/batchwire/wire.h struct bw_hdr, 40 bytes
assert HDR.size == 40
DESC = struct.Struct("<HBBHHII8I")  # struct bw_tensor_desc, 48 bytes
assert DESC.size == 48


def bw_header(opcode=2, version=1, status=0, request_id=1, model_id=0, priority=0, flags=0,
              num_tensors=0, body_len=0, seg_index=0, seg_count=1, total_body_len=None, magic=MAGIC):
    if total_body_len is None:
        total_body_len = body_len
    return HDR.pack(magic, version, opcode, status, request_id, model_id, 0, priority, flags,
                    num_tensors, body_len, seg_index, seg_count, total_body_len)


def bw_message(body=b"", **fields):
    fields.setdefault("body_len", len(body))
    return bw_header(**fields) + body


def float_tensor(values, rank_dims=None, dtype=1, data_len=None, reserved=0):
    dims = rank_dims or [1, len(values)]
    data = struct.pack("<%df" % len(values), *values)
    desc = DESC.pack(0, dtype, len(dims), 0, reserved, len(data) if data_len is None else data_len, 0,
                     *(dims + [0] * (8 - len(dims))))
    return desc, data


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iface", required=True)
    ap.add_argument("--server-ip", required=True)
    ap.add_argument("--client-ip", required=True)
    ap.add_argument("--port", type=int, default=7878)
    ap.add_argument("--per-class", type=int, default=80)
    ap.add_argument("--telemetry", required=True, help="command printing /batchwire/stats as JSON")
    args = ap.parse_args()
    rng = random.Random(7878)
    n = args.per_class

    # Replies to our error-provoking requests come back to this socket, so the client's kernel
    # never answers them with ICMP port unreachable (which batchwire would count as a drop).
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((args.client_ip, 0))
    sport = sock.getsockname()[1]
    sock.setblocking(False)

    arp = srp1(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=args.server_ip, psrc=args.client_ip),
               iface=args.iface, timeout=2)
    if arp is None:
        print("FAIL: batchwire did not answer ARP")
        return 1
    mac = arp[ARP].hwsrc
    # frames with no IP layer get no source MAC from scapy's routing: name ours, or they would come
    # from 00:00:00:00:00:00, which batchwire drops as eth_bad_src
    our_mac = get_if_hwaddr(args.iface)
    eth = Ether(src=our_mac, dst=mac)

    def ip(**kw):
        return IP(src=args.client_ip, dst=args.server_ip, **kw)

    def udp_to_us(payload, **ipkw):
        return eth / ip(**ipkw) / UDP(sport=sport, dport=args.port) / Raw(payload)

    def good_request(i):
        desc, data = float_tensor([float(i)] * 4)
        return bw_message(desc + data, num_tensors=1, request_id=i)

    raw_bytes = bytes

    def with_byte(frame, offset, value):
        b = bytearray(bytes(frame))
        b[offset] = value
        return bytes(b)

    def fix_ip_csum(b):
        b = bytearray(b)
        b[24:26] = b"\0\0"
        s = sum(struct.unpack("!10H", bytes(b[14:34])))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        b[24:26] = struct.pack("!H", ~s & 0xFFFF)
        return bytes(b)

    classes = []  # (name, counter path, frames)

    def add(name, counter, make):
        classes.append((name, counter, [make(i) for i in range(n)]))

    # --- dropped and counted by reason ---
    add("truncated IPv4 header", ("drops_by_reason", "ip_truncated"),
        lambda i: bytes(Ether(src=our_mac, dst=mac, type=0x0800)) + bytes(rng.randrange(256) for _ in range(1 + i % 19)))
    add("IPv4 total length past the frame", ("drops_by_reason", "ip_truncated"),
        lambda i: fix_ip_csum(raw_bytes(udp_to_us(good_request(i), len=2000 + i))))
    add("bad IPv4 version", ("drops_by_reason", "ip_bad_version"),
        lambda i: with_byte(udp_to_us(good_request(i)), 14, 0x65))
    add("IPv4 IHL below 5", ("drops_by_reason", "ip_bad_hdr_len"),
        lambda i: with_byte(udp_to_us(good_request(i)), 14, 0x40 | (i % 5)))
    add("IPv4 total length below IHL", ("drops_by_reason", "ip_bad_total_len"),
        lambda i: fix_ip_csum(raw_bytes(udp_to_us(good_request(i), len=i % 20))))
    add("bad IPv4 header checksum", ("drops_by_reason", "ip_bad_csum"),
        lambda i: raw_bytes(udp_to_us(good_request(i), chksum=0x1234 + i)))
    add("wrong destination IP", ("drops_by_reason", "ip_wrong_dst"),
        lambda i: raw_bytes(eth / IP(src=args.client_ip, dst="10.77.0.%d" % (100 + i % 100)) /
                            UDP(sport=sport, dport=args.port) / Raw(good_request(i))))
    add("unknown IP protocol", ("drops_by_reason", "ip_unknown_proto"),
        lambda i: raw_bytes(eth / ip(proto=253) / Raw(b"x" * (i % 50))))
    add("bad UDP checksum", ("drops_by_reason", "udp_bad_csum"),
        lambda i: raw_bytes(eth / ip() / UDP(sport=sport, dport=args.port, chksum=0x4321 + i) /
                            Raw(good_request(i))))
    add("UDP length disagrees with IP", ("drops_by_reason", "udp_bad_len"),
        lambda i: raw_bytes(eth / ip() / UDP(sport=sport, dport=args.port, len=9 + i, chksum=0) /
                            Raw(good_request(i))))
    add("UDP shorter than its header", ("drops_by_reason", "udp_truncated"),
        lambda i: raw_bytes(eth / ip(proto=17) / Raw(b"\x12" * (i % 8))))
    add("wrong UDP port", ("drops_by_reason", "udp_wrong_port"),
        lambda i: raw_bytes(eth / ip() / UDP(sport=sport, dport=args.port + 1 + i) / Raw(good_request(i))))
    add("protocol header truncated", ("drops_by_reason", "proto_truncated"),
        lambda i: raw_bytes(udp_to_us(good_request(i)[: i % 40])))
    add("random bytes (bad magic)", ("drops_by_reason", "proto_bad_magic"),
        lambda i: raw_bytes(udp_to_us(b"\0\0\0\0" + bytes(rng.randrange(256) for _ in range(36 + i)))))
    add("reply opcode sent to the server", ("drops_by_reason", "proto_reply"),
        lambda i: raw_bytes(udp_to_us(bw_message(opcode=0x80 | (1 + i % 3), request_id=i))))
    add("unknown ethertype", ("drops_by_reason", "eth_unknown_type"),
        lambda i: raw_bytes(Ether(src=our_mac, dst=mac, type=0x88B5) / Raw(b"\0" * (46 + i))))
    # a forged source no reply may go to: broadcast, multicast and zero MACs, martian IPv4 sources
    bad_src = ["ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "33:33:00:00:00:01", "00:00:00:00:00:00"]
    add("broadcast/multicast/zero source MAC", ("drops_by_reason", "eth_bad_src"),
        lambda i: raw_bytes(Ether(src=bad_src[i % 4], dst=mac) / ip() / UDP(sport=sport, dport=args.port) /
                            Raw(good_request(i))))
    martians = ["0.0.0.0", "127.0.0.1", "224.0.0.1", "240.0.0.1", "255.255.255.255", args.server_ip]
    add("martian source IP", ("drops_by_reason", "ip_martian_src"),
        lambda i: raw_bytes(eth / IP(src=martians[i % 6], dst=args.server_ip) / UDP(sport=sport, dport=args.port) /
                            Raw(good_request(i))))
    # the daemon allows 10.77.0.0/30 only (barrage_netns.sh): anyone else gets nothing, IP or ARP
    add("source outside the allowlist", ("drops_by_reason", "src_not_allowed"),
        lambda i: raw_bytes(eth / IP(src="10.77.0.%d" % (100 + i % 100), dst=args.server_ip) /
                            ([UDP(sport=sport, dport=args.port) / Raw(good_request(i)),
                              ICMP() / Raw(b"p" * 8),
                              UDP(sport=sport, dport=args.port) / Raw(bw_message(version=9, request_id=i))][i % 3])))
    add("ARP from outside the allowlist", ("drops_by_reason", "src_not_allowed"),
        lambda i: raw_bytes(Ether(src=our_mac, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=args.server_ip,
                                                                 psrc="10.78.0.%d" % (1 + i % 200))))
    add("unicast to another MAC", ("drops_by_reason", "eth_wrong_dst"),
        lambda i: raw_bytes(Ether(src=our_mac, dst="02:00:00:00:00:%02x" % (i % 256)) / ip() / UDP(dport=args.port)))
    add("ARP for another address", ("drops_by_reason", "arp_not_for_us"),
        lambda i: raw_bytes(Ether(src=our_mac, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.77.0.%d" % (50 + i % 50),
                                                                 psrc=args.client_ip)))
    add("ARP with bad hardware length", ("drops_by_reason", "arp_invalid"),
        lambda i: raw_bytes(Ether(src=our_mac, dst="ff:ff:ff:ff:ff:ff") / ARP(hwlen=8, pdst=args.server_ip)))
    add("ICMP with bad checksum", ("drops_by_reason", "icmp_invalid"),
        lambda i: raw_bytes(eth / ip() / ICMP(chksum=0xBEEF - i) / Raw(b"p" * 8)))
    add("ICMP timestamp request", ("drops_by_reason", "icmp_unsupported"),
        lambda i: raw_bytes(eth / ip() / ICMP(type=13)))

    # --- valid header, nonsense fields: answered with an error status ---
    add("nonsense fields (INVALID_ARGUMENT)", ("replies_by_status", "INVALID_ARGUMENT"),
        lambda i: raw_bytes(udp_to_us([
            bw_message(version=2 + i % 200, request_id=i),
            bw_message(opcode=4 + i % 100, request_id=i),
            bw_message(status=1 + i, request_id=i),
            bw_message(flags=0x04 << (i % 6), request_id=i),
            bw_message(b"abc", body_len=10 + i, request_id=i),
            bw_message(b"", seg_index=3, seg_count=2, request_id=i),
            bw_message(b"", priority=1 + i % 200, request_id=i),
            bw_message(float_tensor([1.0], dtype=8)[0] + b"\0" * 4, num_tensors=1, request_id=i),
            bw_message(b"".join(float_tensor([1.0, 2.0], data_len=4)), num_tensors=1, request_id=i),
        ][i % 9])))
    add("unknown model (NOT_FOUND)", ("replies_by_status", "NOT_FOUND"),
        lambda i: raw_bytes(udp_to_us(bw_message(model_id=1000 + i, request_id=i))))
    # --- segments: a total that cannot be cut into such slices is dropped (remembered as discarded
    # while entries last); a message above the server's cap is answered once, after its first
    # segment (when no entry is free to remember it, segment 0 is still answered, as table_full) ---
    add("segment that fits no message", ("drops_by_reason", "segment"),
        lambda i: raw_bytes(udp_to_us(bw_message(b"x" * 8, seg_count=2 + i, total_body_len=800,
                                                 request_id=i))))
    add("segmented message above the cap (RESOURCE_EXHAUSTED)", ("replies_by_status", "RESOURCE_EXHAUSTED"),
        lambda i: raw_bytes(udp_to_us(bw_message(b"x" * 1024, seg_count=40000, total_body_len=1024 * 40000,
                                                 request_id=10000 + i))))

    before = json.loads(subprocess.check_output(args.telemetry, shell=True))["/batchwire/stats"]
    total = 0
    for name, _, frames in classes:
        sendp(frames, iface=args.iface)
        total += len(frames)
        time.sleep(0.05)  # let the poller drain the af_packet ring between classes
    time.sleep(0.5)
    after = json.loads(subprocess.check_output(args.telemetry, shell=True))["/batchwire/stats"]

    failures = 0
    expected = {}
    for name, (group, key), frames in classes:
        expected[(group, key)] = expected.get((group, key), 0) + len(frames)
    for group in ("drops_by_reason", "replies_by_status"):
        for key in after[group]:
            delta = after[group][key] - before[group][key]
            want = expected.get((group, key), 0)
            status = "ok" if delta == want else "MISMATCH"
            if delta or want:
                print("%-18s %-20s sent %5d  counted %5d  %s" % (group, key, want, delta, status))
            failures += delta != want

    replies = 0
    while True:
        try:
            sock.recv(65536)
            replies += 1
        except BlockingIOError:
            break
    want_replies = sum(len(f) for _, (g, _), f in classes if g == "replies_by_status")
    print("error replies received by the client: %d of %d" % (replies, want_replies))
    failures += replies != want_replies

    # The daemon is still up and answers a good request.
    sock.setblocking(True)
    sock.settimeout(2)
    sock.sendto(good_request(424242), (args.server_ip, args.port))
    reply = sock.recv(65536)
    fields = HDR.unpack(reply[:40])
    ok = fields[0] == MAGIC and fields[2] == 0x82 and fields[3] == 0 and fields[4] == 424242
    print("good request after the barrage: %s" % ("OK" if ok else "BAD REPLY"))
    failures += not ok
    print("%d bad frames in %d classes" % (total, len(classes)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
