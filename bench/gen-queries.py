#!/usr/bin/env python3
"""Write a dnsperf query file (and correctness checks) from exported cns zones.

usage: gen-queries.py --fwd forward.zone --rev reverse.zone --out DIR [--vms N]

Reads the zone text `cns db export` prints (one record per line, absolute
names: "name ttl class type rdata") and writes, in --out:

  queries.txt  dnsperf format ("name TYPE" per line), a deterministic mix
               close to bench/gen-zone.py's default:
               svcA=50 instA=25 SRV=10 TXT=5 NX=10 PTR=5 (percent, --mix)
  checks.txt   names with their expected answers for run-anchors.sh
               ("name TYPE RCODE answer1|answer2|..." sorted as dig +short
               prints them, "-" for none)
  stats.txt    record counts and the query mix (key=value)

Query kinds:
  svcA   A of a service name (<svc>.svc.<owner>.<zone>, 3-30 members)
  instA  A of an instance name (<uuid>.inst... or <alias>.inst...)
  SRV    SRV of a service name that has ports
  TXT    TXT of an instance (half) or a service (half)
  NX     NXDOMAIN: an unknown VM under a real owner, an unknown service
         under a real owner, or an unknown owner (a third each)
  PTR    PTR of a VM address in the reverse zone
Only the Python standard library is used.
"""

import argparse
import collections
import os
import random
import sys


def read_zone(path):
    """-> (origin, {name: {type: [rdata, ...]}}, record count, soa rdata)."""
    names = collections.defaultdict(lambda: collections.defaultdict(list))
    origin, soa, count = None, None, 0
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith(";") or line.startswith("$"):
                continue
            parts = line.split(None, 4)
            if len(parts) < 5:
                sys.exit("%s: cannot parse %r (want name ttl class type rdata)" % (path, line))
            name, _ttl, _cls, typ, rdata = parts
            name = name.lower()
            rdata = rdata.rstrip("\n")
            if typ == "SOA":
                origin, soa = name, rdata
            names[name][typ].append(rdata)
            count += 1
    if origin is None:
        sys.exit("%s: no SOA record: not a zone" % path)
    return origin, names, count, soa


def short(typ, rdata):
    """How dig +short prints one rdata (whitespace collapsed)."""
    return " ".join(rdata.split())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fwd", required=True, help="forward zone file (cns db export)")
    ap.add_argument("--rev", required=True, help="reverse zone file (cns db export)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--vms", type=int, default=0, help="number of VMs (for stats.txt)")
    ap.add_argument("--queries", type=int, default=200000, help="lines in queries.txt (default 200000)")
    ap.add_argument("--mix", default="svcA=50,instA=25,SRV=10,TXT=5,NX=10,PTR=5",
                    help="query mix in parts (default svcA=50,instA=25,SRV=10,TXT=5,NX=10,PTR=5)")
    ap.add_argument("--seed", type=int, default=20240611, help="random seed")
    args = ap.parse_args()

    origin, fwd, fwd_count, fwd_soa = read_zone(args.fwd)
    rev_origin, rev, rev_count, rev_soa = read_zone(args.rev)

    suffix = "." + origin
    svc_a, svc_srv, svc_txt, inst_a, inst_txt, inst_aaaa = [], [], [], [], [], []
    owners = set()
    for name in sorted(fwd):
        if not name.endswith(suffix):
            continue
        labels = name[: -len(suffix)].split(".")
        # <x>.svc.<owner> and <x>.inst.<owner> (user zones); admin services
        # (<svc>.<zone>) and CMON names are left out of the mix
        if len(labels) != 3 or labels[1] not in ("svc", "inst"):
            continue
        owners.add(labels[2])
        t = fwd[name]
        if labels[1] == "svc":
            if t.get("A"):
                svc_a.append(name)
            if t.get("SRV"):
                svc_srv.append(name)
            if t.get("TXT"):
                svc_txt.append(name)
        else:
            if t.get("A"):
                inst_a.append(name)
            if t.get("TXT"):
                inst_txt.append(name)
            if t.get("AAAA"):
                inst_aaaa.append(name)
    ptrs = sorted(n for n, t in rev.items() if t.get("PTR"))
    owners = sorted(owners)
    for what, lst in (("service A", svc_a), ("instance A", inst_a), ("owners", owners)):
        if not lst:
            sys.exit("%s: no %s names found under %s: is this a cns export?" % (args.fwd, what, origin))

    rng = random.Random(args.seed)

    def uuid():
        h = "%032x" % rng.getrandbits(128)
        return "%s-%s-4%s-a%s-%s" % (h[0:8], h[8:12], h[13:16], h[17:20], h[20:32])

    mix = collections.OrderedDict()
    for part in args.mix.split(","):
        k, v = part.split("=")
        mix[k.strip()] = int(v)
    pools = {"svcA": svc_a, "instA": inst_a, "SRV": svc_srv, "TXT": inst_txt + svc_txt, "NX": owners, "PTR": ptrs}
    for k, pct in mix.items():
        if k not in pools:
            sys.exit("unknown query kind %r in --mix (known: %s)" % (k, " ".join(pools)))
        if pct and not pools[k]:
            sys.exit("no names for query kind %r" % k)
    total = sum(mix.values())
    kinds = []
    for k, pct in mix.items():
        kinds.extend([k] * (args.queries * pct // total))
    while len(kinds) < args.queries:
        kinds.append("svcA")
    rng.shuffle(kinds)

    qcounts = collections.Counter()
    with open(os.path.join(args.out, "queries.txt"), "w") as f:
        w = f.write
        for k in kinds:
            qcounts[k] += 1
            if k == "svcA":
                w("%s A\n" % rng.choice(svc_a))
            elif k == "instA":
                w("%s A\n" % rng.choice(inst_a))
            elif k == "SRV":
                w("%s SRV\n" % rng.choice(svc_srv))
            elif k == "TXT":
                w("%s TXT\n" % rng.choice(inst_txt if (rng.random() < 0.5 or not svc_txt) else svc_txt))
            elif k == "NX":
                r, o = rng.randrange(3), rng.choice(owners)
                if r == 0:
                    w("%s.inst.%s.%s A\n" % (uuid(), o, origin))
                elif r == 1:
                    w("nosuch-%d.svc.%s.%s A\n" % (rng.randrange(100000), o, origin))
                else:
                    w("%s.inst.%s.%s A\n" % (uuid(), uuid(), origin))
            elif k == "PTR":
                w("%s PTR\n" % rng.choice(ptrs))

    # correctness checks, answers as dig +short prints them, sorted (LC_ALL=C)
    crng = random.Random(args.seed ^ 0xC0FFEE)
    checks = [(origin, "SOA", "NOERROR", [short("SOA", fwd_soa)]),
              (rev_origin, "SOA", "NOERROR", [short("SOA", rev_soa)])]

    def answers(zone, name, typ):
        return [short(typ, r) for r in zone[name][typ]]

    for _ in range(3):
        n = crng.choice(inst_a)
        checks.append((n, "A", "NOERROR", answers(fwd, n, "A")))
        if fwd[n].get("TXT"):
            checks.append((n, "TXT", "NOERROR", answers(fwd, n, "TXT")))
    if inst_aaaa:
        n = crng.choice(inst_aaaa)
        checks.append((n, "AAAA", "NOERROR", answers(fwd, n, "AAAA")))
    for _ in range(2):
        n = crng.choice(svc_a)
        checks.append((n, "A", "NOERROR", answers(fwd, n, "A")))
    if svc_srv:
        n = crng.choice(svc_srv)
        checks.append((n, "SRV", "NOERROR", answers(fwd, n, "SRV")))
    o = crng.choice(owners)
    checks.append(("%s.inst.%s.%s" % (uuid(), o, origin), "A", "NXDOMAIN", []))
    checks.append(("nosuch.svc.%s.%s" % (o, origin), "A", "NXDOMAIN", []))
    # an empty non-terminal answers NOERROR/NODATA, never NXDOMAIN
    checks.append(("inst.%s.%s" % (o, origin), "A", "NOERROR", []))
    # an existing name, another type: NODATA
    checks.append((crng.choice(inst_a), "SRV", "NOERROR", []))
    if ptrs:
        n = crng.choice(ptrs)
        checks.append((n, "PTR", "NOERROR", answers(rev, n, "PTR")))
    with open(os.path.join(args.out, "checks.txt"), "w") as f:
        for q, t, rc, ans in checks:
            f.write("%s %s %s %s\n" % (q, t, rc, "|".join(sorted(ans)) if ans else "-"))

    types = collections.Counter()
    for t in fwd.values():
        for typ, rr in t.items():
            types[typ] += len(rr)
    with open(os.path.join(args.out, "stats.txt"), "w") as f:
        f.write("vms=%d\nowners=%d\nservices=%d\nsrv_services=%d\n" % (args.vms, len(owners), len(svc_a), len(svc_srv)))
        for typ in sorted(types):
            f.write("rr_%s=%d\n" % (typ, types[typ]))
        f.write("forward_rrs=%d\nreverse_rrs=%d\n" % (fwd_count, rev_count))
        f.write("forward_bytes=%d\nreverse_bytes=%d\n" % (os.path.getsize(args.fwd), os.path.getsize(args.rev)))
        for k in sorted(qcounts):
            f.write("queries_%s=%d\n" % (k, qcounts[k]))


if __name__ == "__main__":
    main()
