#!/usr/bin/env bash
# CUSTOM_CMD for bench/run-anchors.sh: serves a db that bench/run.sh
# prepared, the way cns restarts in production (from its db, at once).
#
# usage: cns-custom.sh CNS_BINARY PREP_DIR ADDR PORT FWD_ZONE_FILE RUN_DIR
#
# run-anchors passes {addr} {port} {fwd} {dir}; the size comes from the
# directory of {fwd} ($OUT/zones/N<size>/forward.zone), the db from
# PREP_DIR/N<size>/: a spare copy bench/run.sh made for each repetition is
# moved (renamed, not copied) into RUN_DIR, so the load time run-anchors
# measures is cns's restart-to-first-answer, not a file copy. The config is
# PREP_DIR/N<size>/serve.json.in with @LISTEN@ replaced. cns stays in the
# foreground (exec), as run-anchors expects, and stops on SIGTERM.
set -euo pipefail

if [ $# -ne 6 ]; then
    echo "usage: $0 CNS_BINARY PREP_DIR ADDR PORT FWD_ZONE_FILE RUN_DIR" >&2
    exit 2
fi
cns=$1 prep=$2 addr=$3 port=$4 fwd=$5 dir=$6
size=$(basename "$(dirname "$fwd")")
src=$prep/$size
[ -f "$src/cns.db" ] || { echo "cns-custom: no prepared db $src/cns.db (run bench/run.sh)" >&2; exit 1; }
[ -f "$src/serve.json.in" ] || { echo "cns-custom: no config template $src/serve.json.in" >&2; exit 1; }
mkdir -p "$dir"

spare=""
for f in "$src"/spare/*.db; do
    [ -f "$f" ] && { spare=$f; break; }
done
if [ -n "$spare" ]; then
    mv "$spare" "$dir/cns.db"
else
    echo "cns-custom: no spare copy of the db left in $src/spare; copying (the load time includes the copy)" >&2
    cp "$src/cns.db" "$dir/cns.db"
fi
sed "s/@LISTEN@/$addr:$port/" "$src/serve.json.in" > "$dir/cns.json"
exec "$cns" serve -c "$dir/cns.json"
