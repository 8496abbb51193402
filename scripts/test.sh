#!/usr/bin/env bash
# Runs every test once per server kind, the passes side by side:
#   couchdb  Apache CouchDB, started by the tests from ../shared/couchdb (or
#            SOFA_COUCHDB_RELEASE), or the servers named by SOFA_COUCHDB_URL
#   pouchdb  PouchDB Server from node_modules
# then the race detector over RACE_PKGS on the first kind. Prints which
# server each pass ran on, what was skipped and why, and one closing line
# "N passed, N failed, N skipped". Exit status: non-zero when any pass failed.
#
# Environment: TEST_PKGS, RACE_PKGS (package patterns), GO, SOFA_TEST_KINDS
# (a space-separated subset of "couchdb pouchdb"), TEST_TIMEOUT.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
TEST_PKGS=${TEST_PKGS:-./...}
RACE_PKGS=${RACE_PKGS:-. ./internal/... ./replicate/... ./couch/... ./archive/... ./verify/... ./fleet/... ./storage/...}
TEST_TIMEOUT=${TEST_TIMEOUT:-40m}
out=.work/test
mkdir -p "$out"

couch_why=""
if [ -z "${SOFA_COUCHDB_URL:-}" ] && [ -z "${SOFA_COUCHDB_RELEASE:-}" ] &&
	! ls ../shared/couchdb/couchdb-*.tar.gz >/dev/null 2>&1; then
	couch_why="no release in ../shared/couchdb and neither SOFA_COUCHDB_RELEASE nor SOFA_COUCHDB_URL is set"
fi

kinds=${SOFA_TEST_KINDS:-couchdb pouchdb}
run=()
for k in $kinds; do
	if [ "$k" = couchdb ] && [ -n "$couch_why" ]; then
		continue
	fi
	run+=("$k")
done
if [ ${#run[@]} -eq 0 ]; then
	echo "test.sh: no server kind to run (SOFA_TEST_KINDS=$kinds; CouchDB: $couch_why)" >&2
	exit 1
fi

# A server named by SOFA_COUCHDB_URL is shared: its pass runs one package
# at a time.
pflag() { if [ "$1" = couchdb ] && [ -n "${SOFA_COUCHDB_URL:-}" ]; then echo "-p 1"; fi; }

declare -A pid rc
for k in "${run[@]}"; do
	echo "== test pass on $k: go test $TEST_PKGS (log: $out/$k.log)"
	# shellcheck disable=SC2046
	SOFA_TEST_SERVER=$k $GO test -count=1 -v -timeout "$TEST_TIMEOUT" $(pflag "$k") $TEST_PKGS >"$out/$k.log" 2>&1 &
	pid[$k]=$!
done
for k in "${run[@]}"; do
	wait "${pid[$k]}"
	rc[$k]=$?
done

race_kind=${run[0]}
echo "== race pass on $race_kind: go test -race $RACE_PKGS (log: $out/race.log)"
# shellcheck disable=SC2046,SC2086
SOFA_TEST_SERVER=$race_kind $GO test -race -count=1 -v -timeout 20m $(pflag "$race_kind") $RACE_PKGS >"$out/race.log" 2>&1
rc[race]=$?

# failed_output LOG prints, for each failed test of a go test -v log, the
# lines it logged (go test -v streams them after its "=== RUN/CONT NAME"
# marker, before "--- FAIL"), at most 40 each, then its FAIL line; a panic
# and what follows it too.
failed_output() {
	awk '
		/^=== (RUN|CONT|PAUSE|NAME)[[:space:]]/ { cur=$3; next }
		/^[[:space:]]*--- FAIL: / {
			name=$3
			if (!(name in shown)) {
				shown[name]=1
				n=cnt[name]
				from=(n > 40) ? n-40 : 0
				for (i=from; i<n; i++) print buf[name, i]
			}
			print; next
		}
		/^panic: / { panicking=1 }
		panicking && printed < 60 { print; printed++; next }
		/^[[:space:]]*--- (PASS|SKIP)/ { next }
		cur != "" { buf[cur, cnt[cur]++]=$0 }
	' "$1"
}

passed=0 failed=0 skipped=0 status=0
for k in "${run[@]}" race; do
	log=$out/$k.log
	p=$(grep -c -E '^\s*--- PASS' "$log")
	f=$(grep -c -E '^\s*--- FAIL' "$log")
	s=$(grep -c -E '^\s*--- SKIP' "$log")
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	echo
	echo "=================== pass: $k (exit ${rc[$k]}) ==================="
	grep -m1 -h '^couchtest: end-to-end tests run on' "$log" || true
	grep -E '^(ok|FAIL|panic:|---|\?)\s' "$log" | grep -v -E '^--- (PASS|SKIP)' || true
	if [ "$f" -gt 0 ] || [ "${rc[$k]}" -ne 0 ]; then
		status=1
		echo "-- failures in $k (details in $log):"
		failed_output "$log" | head -300
	fi
	if [ "$s" -gt 0 ]; then
		echo "-- skipped in $k:"
		# go test -v prints a skip's reason on the line before "--- SKIP".
		awk '/^[[:space:]]*--- SKIP/ { name=$3; sub(/^[[:space:]]+/, "", prev); print "  " name ": " prev } { prev=$0 }' "$log" | sort -u | head -60
	fi
	echo "$k: $p passed, $f failed, $s skipped"
done
echo
if [ -n "$couch_why" ]; then
	echo "SKIPPED: every CouchDB pass ($couch_why). Point SOFA_COUCHDB_URL at a CouchDB 3.x"
	echo "(for example: docker run -d -p 5984:5984 -e COUCHDB_USER=admin -e COUCHDB_PASSWORD=pw couchdb:3.5,"
	echo "then SOFA_COUCHDB_URL=http://admin:pw@127.0.0.1:5984 make test) to run them."
fi
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
