#!/usr/bin/env bash
# Benchmarks of sofa against its peers (see BENCHMARKS.md), on in-memory
# PouchDB Servers started for the run (-server couchdb: CouchDB instances
# started from the release; -server-url URL1,URL2: running CouchDB servers,
# wiped):
#
#   scripts/bench.sh [FLAGS] [replicate|latency|fleet|controller|backup|seeds|s3|lag ...]
#
# With no names every benchmark but seeds, s3 and lag runs (about 25 minutes on 2 cores at the
# default sizes). FLAGS go to bench/cmd/benchrun (scripts/bench.sh -h lists
# them); -smoke shrinks every size to check the harness in a couple of
# minutes. Each benchmark prints its table; every measurement is appended
# as a JSON line to $BENCH_OUT (default bench/results/bench-DATE.jsonl).
# seeds and s3 run only when named; s3 (issue 13: sofa backup/restore on
# S3 through a bandwidth-capped proxy, against aws s3 cp and rclone) wants
# -server couchdb and installs its peers' Debian packages first
# (scripts/bench-debs.sh); versitygw is installed as make deps does
# (internal/s3test) when missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ ! -x node_modules/.bin/pouchdb-server ]]; then
	echo "bench: node_modules is missing; run 'make deps' (npm ci) first" >&2
	exit 1
fi
bindir="${SOFA_BENCH_BIN:-${TMPDIR:-/tmp}/sofa-bench}"
mkdir -p "$bindir" bench/results
go build -o bin/sofa ./cmd/sofa
go build -o "$bindir/benchrun" ./bench/cmd/benchrun
go build -o "$bindir/measure" ./bench/cmd/measure
for a in "$@"; do
	if [[ "$a" == s3 ]]; then
		scripts/bench-debs.sh
	fi
done
out="${BENCH_OUT:-bench/results/bench-$(date +%Y%m%d-%H%M%S).jsonl}"
exec "$bindir/benchrun" -root "$ROOT" -sofa bin/sofa -measure "$bindir/measure" -out "$out" "$@"
