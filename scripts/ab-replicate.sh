#!/usr/bin/env bash
# ab-replicate.sh: interleaved copies of one database by several sofa
# binaries, to compare builds on a quiet machine (the median and every
# run's wall time in ms, and each run's user+sys CPU in ms).
#
#   scripts/ab-replicate.sh ROUNDS SOURCE_DB_URL TARGET_SERVER_URL SOFA_BIN...
#
# Each round runs every binary once, in the order given, copying
# SOURCE_DB_URL into a new database ab-scratch of TARGET_SERVER_URL
# (created by the copy, deleted with curl after each run). The copies are
# not checked (a timing comparison of builds; the tests check the copies).
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,11p' "$0"; exit 2; }
rounds=$1 src=$2 tgt=${3%/}
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsS -X DELETE "$tgt/ab-scratch" >/dev/null 2>&1 || true
for _ in $(seq "$rounds"); do
  for bin in "$@"; do
    /usr/bin/time -f "%e %U %S" -o "$tmp/t" "$bin" replicate --create-target "$src" "$tgt/ab-scratch" -q
    read -r wall user sys <"$tmp/t"
    awk -v b="$bin" -v w="$wall" -v u="$user" -v s="$sys" 'BEGIN { printf "%s %d %d\n", b, w*1000, (u+s)*1000 }'
    curl -fsS -X DELETE "$tgt/ab-scratch" >/dev/null
  done
done | sort -k1,1 -k2n | awk '
  { n[$1]++; v[$1, n[$1]] = $2; all[$1] = all[$1] " " $2; cpu[$1] = cpu[$1] " " $3 }
  END { for (b in n) printf "%s: median %d ms; runs (ms):%s; cpu (ms):%s\n", b, v[b, int((n[b] + 1) / 2)], all[b], cpu[b] }'
