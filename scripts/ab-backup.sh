#!/usr/bin/env bash
# ab-backup.sh: interleaved backups of one database or server by several
# sofa binaries, to compare builds on a quiet machine (the median and every
# run's wall time in ms, and each run's user+sys CPU in ms).
#
#   scripts/ab-backup.sh ROUNDS SOURCE_URL SOFA_BIN...
#
# Each round runs every binary once, in the order given, backing SOURCE_URL
# up into a scratch file that is deleted after each run.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,9p' "$0"; exit 2; }
rounds=$1 src=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for _ in $(seq "$rounds"); do
  for bin in "$@"; do
    /usr/bin/time -f "%e %U %S" -o "$tmp/t" "$bin" backup "$src" "$tmp/a.sofa" -q
    read -r wall user sys <"$tmp/t"
    awk -v b="$bin" -v w="$wall" -v u="$user" -v s="$sys" 'BEGIN { printf "%s %d %d\n", b, w*1000, (u+s)*1000 }'
    rm -f "$tmp/a.sofa"
  done
done | sort -k1,1 -k2n | awk '
  { n[$1]++; v[$1, n[$1]] = $2; all[$1] = all[$1] " " $2; cpu[$1] = cpu[$1] " " $3 }
  END { for (b in n) printf "%s: median %d ms; runs (ms):%s; cpu (ms):%s\n", b, v[b, int((n[b] + 1) / 2)], all[b], cpu[b] }'
