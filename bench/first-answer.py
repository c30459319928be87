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

With --warm-line TEXT (and --log), it keeps probing after --duration until
TEXT appears in the server's log (cns: "zones loaded into memory", logged
when every zone is served from the in-memory tables), up to --timeout:
warm_ms is from the exec to the moment the line was seen (polled every
10 ms with the probes), took_ms the duration the line itself reports (its
"took" field: the table building alone, without the process start and the
db open). rss_kib and hwm_kib are the server's VmRSS right after that line
and its VmHWM (peak RSS while restarting and warming up), from
/proc/PID/status, and cpu_ms the CPU time (user + system) the server had
used by then, from /proc/PID/stat: a cost the machine's other load does
not move. COMMAND must exec the server (taskset, exec in scripts), so that
the PID started is the server's.

Prints one tab-separated line: first_ms all_ms answers p50_ms p99_ms max_ms,
then with --warm-line: warm_ms took_ms rss_kib hwm_kib cpu_ms ("nan" when unknown)
Only the Python standard library is used.
"""
import argparse
import json
import os
import re
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


def warm_seen(log, text, t0, pid):
    """(ms since t0, the line's own "took" in ms, (rss, hwm), cpu ms) once log
    holds text, else None."""
    try:
        with open(log) as f:
            for line in f:
                if text in line:
                    return (time.monotonic() - t0) * 1000, took_ms(line), proc_memory(pid), cpu_ms(pid)
    except OSError:
        pass
    return None


def took_ms(line):
    """The "took" field of a JSON log line ("1.234s", "850ms", Go's Duration.String) in ms."""
    try:
        v = json.loads(line).get("took", "")
    except ValueError:
        return float("nan")
    units = {"h": 3600e3, "m": 60e3, "s": 1e3, "ms": 1.0, "us": 1e-3, "µs": 1e-3, "ns": 1e-6}
    parts = re.findall(r"([0-9.]+)(h|ms|m|s|us|µs|ns)", str(v))
    return sum(float(x) * units[u] for x, u in parts) if parts else float("nan")


def cpu_ms(pid):
    """utime + stime of pid in ms, as a string ("nan" when gone)."""
    try:
        stat = open("/proc/%d/stat" % pid).read()
    except OSError:
        return "nan"
    fields = stat[stat.rindex(")") + 2:].split()
    return "%d" % ((int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK"))


def proc_memory(pid):
    """(VmRSS, VmHWM) of pid in KiB, as strings ("nan" when gone)."""
    got = {}
    try:
        for line in open("/proc/%d/status" % pid):
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                got[k] = v.split()[0]
    except OSError:
        pass
    return got.get("VmRSS", "nan"), got.get("VmHWM", "nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--addr", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--zones", required=True, help="comma-separated zone names")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of answers after the first (default 5)")
    ap.add_argument("--timeout", type=float, default=60.0, help="give up when nothing answers within (default 60 s)")
    ap.add_argument("--log", help="file for the server's stdout and stderr")
    ap.add_argument("--warm-line", help="wait after --duration until the log holds this text (needs --log)")
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
        qid, first, seen, lat, warm = 0, None, {}, [], None
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
            if a.warm_line and warm is None:
                warm = warm_seen(a.log, a.warm_line, t0, p.pid)
            time.sleep(max(0.0, 0.01 - (time.monotonic() - t)))
        while a.warm_line and warm is None and p.poll() is None and time.monotonic() - t0 < a.timeout:
            time.sleep(0.01)
            warm = warm_seen(a.log, a.warm_line, t0, p.pid)
        all_ms = max(seen.values()) * 1000 if len(seen) == len(zones) else float("nan")
        lat.sort()
        pick = lambda q: lat[min(len(lat) - 1, int(len(lat) * q))] * 1000 if lat else float("nan")
        line = "%.1f\t%.1f\t%d\t%.2f\t%.2f\t%.2f" % (first * 1000, all_ms, len(lat), pick(0.5), pick(0.99), lat[-1] * 1000 if lat else float("nan"))
        if a.warm_line:
            nan = float("nan")
            warm_ms, took, (rss, hwm), cpu = warm if warm else (nan, nan, ("nan", "nan"), "nan")
            line += "\t%.1f\t%.1f\t%s\t%s\t%s" % (warm_ms, took, rss, hwm, cpu)
        print(line)
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
