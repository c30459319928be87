#!/usr/bin/env python3
"""Time from starting a DNS server to its first answer, and how it answers next.

usage: first-answer.py --port PORT --zones Z1,Z2 [--duration S] -- COMMAND...

Starts COMMAND (pin it with taskset in COMMAND itself), sends an SOA query
for the first zone every 2 ms until one is answered (first_ms: from the
exec to that answer), then keeps asking every zone's SOA in turn, one
query every 10 ms, for --duration seconds, recording each answer's latency
(what a resolver sees while a freshly started cns still builds its
in-memory tables). all_ms is when every zone had answered once. The server
is then stopped with SIGTERM.

Prints one tab-separated line: first_ms all_ms answers p50_ms p99_ms max_ms
Only the Python standard library is used.
"""
import argparse
import signal
import socket
import struct
import subprocess
import sys
import time


def soa_query(zone, qid):
    labels = [l for l in zone.strip(".").split(".") if l]
    name = b"".join(bytes([len(l)]) + l.encode() for l in labels) + b"\x00"
    return struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0) + name + struct.pack(">HH", 6, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--addr", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--zones", required=True, help="comma-separated zone names")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of answers after the first (default 5)")
    ap.add_argument("--timeout", type=float, default=60.0, help="give up when nothing answers within (default 60 s)")
    ap.add_argument("--log", help="file for the server's stdout and stderr")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        sys.exit("no command")
    zones = a.zones.split(",")
    dest = (a.addr, a.port)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out = open(a.log, "w") if a.log else subprocess.DEVNULL
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        qid, first, seen, lat = 0, None, {}, []
        while first is None:
            if p.poll() is not None:
                sys.exit("server exited with status %d before answering" % p.returncode)
            if time.monotonic() - t0 > a.timeout:
                sys.exit("no answer within %.0f s" % a.timeout)
            qid = (qid + 1) & 0xFFFF
            s.settimeout(0.002)
            try:
                s.sendto(soa_query(zones[0], qid), dest)
                while True:
                    r = s.recv(4096)
                    if len(r) >= 2 and struct.unpack(">H", r[:2])[0] == qid:
                        first = time.monotonic() - t0
                        seen[zones[0]] = first
                        break
            except (socket.timeout, ConnectionRefusedError):
                pass
        end = time.monotonic() + a.duration
        i = 0
        while time.monotonic() < end:
            i += 1
            z = zones[i % len(zones)]
            qid = (qid + 1) & 0xFFFF
            t = time.monotonic()
            s.settimeout(1.0)
            try:
                s.sendto(soa_query(z, qid), dest)
                while True:
                    r = s.recv(4096)
                    if len(r) >= 2 and struct.unpack(">H", r[:2])[0] == qid:
                        now = time.monotonic()
                        lat.append(now - t)
                        seen.setdefault(z, now - t0)
                        break
            except (socket.timeout, ConnectionRefusedError):
                lat.append(1.0)
            time.sleep(max(0.0, 0.01 - (time.monotonic() - t)))
        all_ms = max(seen.values()) * 1000 if len(seen) == len(zones) else float("nan")
        lat.sort()
        pick = lambda q: lat[min(len(lat) - 1, int(len(lat) * q))] * 1000 if lat else float("nan")
        print("%.1f\t%.1f\t%d\t%.2f\t%.2f\t%.2f" % (first * 1000, all_ms, len(lat), pick(0.5), pick(0.99), lat[-1] * 1000 if lat else float("nan")))
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
