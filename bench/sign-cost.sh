#!/usr/bin/env bash
# What signing cns's zone would cost (should cns sign itself?).
# Signs the forward zone bench/run.sh exports (PREP_ONLY=1 is enough) with
# dnssec-signzone on one thread, ECDSAP256SHA256 and RSASHA256 (2048-bit
# keys), NSEC, REPS times each, and prints wall and CPU seconds per run,
# the RRSIG count and the signed zone's size.
#
# Run:   WORK=/tmp/cns-bench SIZES=100000 PREP_ONLY=1 bench/run.sh
#        bench/sign-cost.sh
# Knobs: ZONE ($WORK/zones/N100000/forward.zone)  ORIGIN (dc.cns.example)
#        REPS (3)  OUT (${TMPDIR:-/tmp}/cns-sign-cost)
# Needs: bind9-utils (dnssec-keygen, dnssec-signzone), GNU time.
set -euo pipefail
WORK=${WORK:-${TMPDIR:-/tmp}/cns-bench}
ZONE=${ZONE:-$WORK/zones/N100000/forward.zone}
ORIGIN=${ORIGIN:-dc.cns.example}
REPS=${REPS:-3}
OUT=${OUT:-${TMPDIR:-/tmp}/cns-sign-cost}
[ -f "$ZONE" ] || { echo "no zone at $ZONE (run bench/run.sh with PREP_ONLY=1 first)" >&2; exit 1; }
mkdir -p "$OUT"
cd "$OUT"
for alg in ECDSAP256SHA256 RSASHA256; do
    rm -rf "k-$alg"
    mkdir "k-$alg"
    bits=()
    [ "$alg" = RSASHA256 ] && bits=(-b 2048)
    dnssec-keygen -q -K "k-$alg" -a "$alg" "${bits[@]}" "$ORIGIN" >/dev/null
    dnssec-keygen -q -K "k-$alg" -a "$alg" "${bits[@]}" -f KSK "$ORIGIN" >/dev/null
    for i in $(seq "$REPS"); do
        /usr/bin/time -f "$alg run $i: wall %e s, user %U s, sys %S s, max RSS %M KiB" \
            dnssec-signzone -n 1 -q -S -K "k-$alg" -o "$ORIGIN" -f "signed-$alg.zone" "$ZONE" >/dev/null
    done
    echo "$alg: $(grep -c RRSIG "signed-$alg.zone") RRSIGs, $(stat -c %s "signed-$alg.zone") bytes signed ($(stat -c %s "$ZONE") unsigned)"
done
