#!/usr/bin/env bash
# Reliability and security runs; RELIABILITY.md has the table.
#
#   bench/reliability.sh            quick: the reliability tests as CI runs them,
#                                   fuzz seed corpora, go vet, govulncheck
#   LONG=1 bench/reliability.sh     long: 50 kill -9 restarts, longer chaos and
#                                   abuse runs, and every fuzzer for $FUZZTIME
#   bench/reliability.sh fuzz       only the fuzzers ($FUZZTIME each, default 5m)
#   bench/reliability.sh corpus     copy what the fuzzers found (Go's fuzz cache)
#                                   into testdata/fuzz/, where every go test runs it
#   bench/reliability.sh powercut   the power-cut runs in their long form: the db's life
#                                   cut before every file operation, 60 rounds of cns serve
#                                   with BIND, Knot and NSD (CNS_POWER_CUTS=N for N rounds)
#   bench/reliability.sh soak       the soak (TestSoak) for $SOAK_DURATION (10m; LONG=1:
#                                   60m), sampled every $SOAK_INTERVAL (10s; LONG=1: 60s),
#                                   plotted to bench/soak.svg with the slopes in bench/soak.md
#
# Knobs: FUZZTIME (5m), FUZZ (a regexp selecting fuzzers), TESTS (a regexp
# selecting tests), OUT (where logs go, default /tmp/cns-reliability). Fuzzers run one at a time with one
# worker, so the machine keeps a core for everything else.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cns-reliability}
FUZZTIME=${FUZZTIME:-5m}
FUZZ=${FUZZ:-.}
# The reliability scenarios (RELIABILITY.md) and the older tests they build on.
TESTS=${TESTS:-'Kill9|DiskFull|DNSAbuse|RRL|Secrets|Differential|SDCChaos|SDCFaults|TCPLimits|TCPGlobalLimit|ProtocolEdges|TSIGError|TransferACL|TransferKeyBinding|UDPIXFRAccess|ClassANY|RemoteCallers|Authorization|SerialContinuity|SerialCheck|ClockSteps|Soak|HeapFloorGrowth|ChurnDBSize|Compact|Restore|OneVMChangeIsIXFR|PowerCut|SurvivesPowerCut'}
mkdir -p "$OUT"

# "package fuzzer", one a line: every Fuzz function of the module's tests.
FUZZERS=$(grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |$(dirname "$f") |"
done)

fuzz() {
	echo "fuzzer	package	time	execs	result" > "$OUT/fuzz.tsv"
	echo "$FUZZERS" | while read -r pkg name; do
		[ -n "$name" ] || continue
		echo "$name" | grep -Eq "$FUZZ" || continue
		log="$OUT/$name.log"
		echo "== $name ($pkg, $FUZZTIME)"
		go test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -parallel 1 "$pkg" > "$log" 2>&1
		rc=$?
		execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
		result=PASS
		if grep -q 'no fuzz tests to fuzz' "$log"; then
			result="FAIL (no such fuzzer in $pkg)"
		elif [ $rc -ne 0 ]; then
			if grep -q 'Failing input written' "$log" || ! grep -q 'context deadline exceeded' "$log"; then
				result="FAIL (see $log)"
			else
				# Go <= 1.26 may report the -fuzztime deadline itself as a
				# failure when it races a busy worker (go.dev/issue/75804):
				# no input failed, nothing was written.
				result="PASS (no failing input; go.dev/issue/75804 deadline race at the end)"
			fi
		fi
		printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$pkg" "$FUZZTIME" "${execs:-0}" "$result" | tee -a "$OUT/fuzz.tsv"
	done
	! grep -q 'FAIL (' "$OUT/fuzz.tsv"
}

corpus() {
	local cache
	cache=$(go env GOCACHE)/fuzz/$(go list -m)
	echo "$FUZZERS" | while read -r pkg name; do
		[ -n "$name" ] || continue
		echo "$name" | grep -Eq "$FUZZ" || continue
		src="$cache/${pkg#./}/$name"
		[ "$pkg" = . ] && src="$cache/$name"
		[ -d "$src" ] || continue
		dst="$pkg/testdata/fuzz/$name"
		mkdir -p "$dst"
		cp -n "$src"/* "$dst"/
		echo "$name: $(ls "$dst" | wc -l) inputs in $dst"
	done
}

tests() {
	local long=${LONG:-}
	export CNS_LONG=${long}
	[ -n "$long" ] && export CNS_KILLS=${CNS_KILLS:-50}
	echo "== go vet"
	go vet ./... || return 1
	echo "== govulncheck"
	if command -v govulncheck > /dev/null || [ -x "$(go env GOPATH)/bin/govulncheck" ]; then
		PATH=$PATH:$(go env GOPATH)/bin timeout 300 govulncheck ./... 2>&1 | tail -20 || echo "govulncheck failed (is the vulnerability database reachable?)"
	else
		echo "govulncheck not installed: go install golang.org/x/vuln/cmd/govulncheck@latest"
	fi
	echo "== fuzz seed corpora and reliability tests"
	go test -count=1 -timeout 60m -run '^Fuzz' ./... || return 1
	go test -count=1 -timeout 90m -v -run "$TESTS" ./ ./serve/ ./admin/ ./admin/config/ ./db/... ./feeds/hysteresis/ 2>&1 | tee "$OUT/tests.log" |
		grep -E '^(--- |PASS|FAIL|ok|\s+\S+_test.go:[0-9]+: )'
	return "${PIPESTATUS[0]}"
}

powercut() {
	echo "== power cuts (long form)"
	CNS_LONG=1 go test -count=1 -timeout 3h -v -run 'PowerCut' ./ ./db/... ./admin/config/ 2>&1 | tee "$OUT/powercut.log" |
		grep -E '^(--- |PASS|FAIL|ok|\s+\S+_test.go:[0-9]+: )'
	return "${PIPESTATUS[0]}"
}

soak() {
	local long=${LONG:-}
	local duration=${SOAK_DURATION:-$([ -n "$long" ] && echo 60m || echo 10m)}
	local interval=${SOAK_INTERVAL:-$([ -n "$long" ] && echo 60s || echo 10s)}
	echo "== soak ($duration, a sample every $interval)"
	CNS_SOAK_DURATION=$duration CNS_SOAK_INTERVAL=$interval CNS_SOAK_OUT="$OUT/soak.tsv" \
		go test -count=1 -timeout 3h -v -run '^TestSoak$' . 2>&1 | tee "$OUT/soak.log" |
		grep -E '^(--- |PASS|FAIL|ok|\s+\S+_test.go:[0-9]+: )'
	[ "${PIPESTATUS[0]}" -eq 0 ] || return 1
	python3 bench/soakplot.py "$OUT/soak.tsv" bench/soak.svg "${SOAK_WARMUP:-0.2}" | tee "$OUT/soak.md"
	cp "$OUT/soak.tsv" bench/soak.tsv
	cp "$OUT/soak.md" bench/soak.md
}

case "${1:-}" in
fuzz) fuzz || exit 1 ;;
soak) soak ;;
powercut) powercut ;;
corpus) corpus ;;
*)
	tests || exit 1
	[ -n "${LONG:-}" ] && fuzz && powercut && soak
	;;
esac
