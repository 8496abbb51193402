#!/usr/bin/env bash
# Whole-server restore on Apache CouchDB: two sofa binaries (before and
# after a change) and couchrestore, in one run, on the same archives.
#
#   scripts/bench-restore-servers.sh OLD_SOFA NEW_SOFA [RUNS]
#
# Starts two CouchDB 3.5 instances from the release ([log] level =
# warning), seeds the source with 1000 databases of 1 document ("one-*")
# and 200 of 100 documents of about 100 bytes ("hundred-*"), backs each set
# up once with NEW_SOFA (and with couchbackup-all.js for couchrestore),
# then, RUNS times (default 2), restores each archive into the emptied
# target with OLD_SOFA, NEW_SOFA and couchrestore-all.js, one after the
# other, and prints the wall time of each. Each restore is checked: the
# target then holds every database with its document count.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OLD=$1 NEW=$2 RUNS=${3:-2}
REL=${SOFA_COUCHDB_RELEASE:-/work/shared/couchdb/couchdb-3.5.2-linux-amd64.tar.gz}
SH=$(dirname "$REL")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sofa-bench-restore.XXXXXX")
SP=${SRC_PORT:-25984} TP=${TGT_PORT:-25985}
printf '[log]\nlevel = warning\n' >"$WORK/extra.ini"
cleanup() { bash "$SH/stop.sh" "$WORK/src" >/dev/null 2>&1 || true; bash "$SH/stop.sh" "$WORK/tgt" >/dev/null 2>&1 || true; }
trap cleanup EXIT
COUCHDB_EXTRA_INI=$WORK/extra.ini bash "$SH/start.sh" "$REL" "$WORK/src" "$SP" >/dev/null
COUCHDB_EXTRA_INI=$WORK/extra.ini bash "$SH/start.sh" "$REL" "$WORK/tgt" "$TP" >/dev/null
SRC=http://admin:admin@127.0.0.1:$SP TGT=http://admin:admin@127.0.0.1:$TP

seed() { # prefix count docs
	local prefix=$1 n=$2 docs=$3
	seq -f "$prefix-%04g" 0 $((n - 1)) >"$WORK/$prefix.names"
	body=$(python3 -c "import json,sys; n=int(sys.argv[1]); print(json.dumps({'docs':[{'_id':'d%03d'%i,'n':i,'text':'x'*80} for i in range(n)]}))" "$docs")
	printf '%s' "$body" >"$WORK/$prefix.body"
	xargs -P 8 -I{} sh -c "curl -fsS -X PUT '$SRC/{}' >/dev/null && curl -fsS -H 'Content-Type: application/json' -X POST '$SRC/{}/_bulk_docs' --data-binary @'$WORK/$prefix.body' >/dev/null" <"$WORK/$prefix.names"
}
wipe() {
	curl -fsS "$TGT/_all_dbs" | python3 -c "import json,sys; print('\n'.join(d for d in json.load(sys.stdin) if not d.startswith('_')))" >"$WORK/wipe.names"
	if [[ -s "$WORK/wipe.names" ]]; then
		xargs -P 8 -I{} curl -fsS -X DELETE "$TGT/{}" <"$WORK/wipe.names" >/dev/null
	fi
}
check() { # prefix count docs
	got=$(curl -fsS "$TGT/_all_dbs" | python3 -c "import json,sys; print(sum(1 for d in json.load(sys.stdin) if d.startswith('$1-')))")
	[[ $got == "$2" ]] || { echo "check: $got databases $1-* on the target, want $2" >&2; exit 1; }
	docs=$(python3 - "$TGT" "$WORK/$1.names" <<'EOF'
import json, sys, urllib.request, base64
url, names = sys.argv[1], open(sys.argv[2]).read().split()
u = urllib.request.urlparse(url)
auth = base64.b64encode(f"{u.username}:{u.password}".encode()).decode()
base = f"{u.scheme}://{u.hostname}:{u.port}"
total = 0
for i in range(0, len(names), 100):
    req = urllib.request.Request(base + "/_dbs_info", data=json.dumps({"keys": names[i:i+100]}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Basic " + auth})
    for row in json.load(urllib.request.urlopen(req)):
        total += row["info"]["doc_count"]
print(total)
EOF
)
	[[ $docs == $(($2 * $3)) ]] || { echo "check: $docs documents in $1-* on the target, want $(($2 * $3))" >&2; exit 1; }
}
now() { date +%s.%N; }

seed one 1000 1
seed hundred 200 100
for set in one hundred; do
	"$NEW" backup "$SRC" "$WORK/$set.sofa" -q --include "$set-*"
	mkdir -p "$WORK/cb-$set"
	(cd "$ROOT" && node bench/couchbackup-all.js "$SRC" "$WORK/cb-$set" $(cat "$WORK/$set.names") >/dev/null)
done
declare -A n=([one]=1000 [hundred]=200) d=([one]=1 [hundred]=100)
printf '%-8s %-4s %-13s %8s\n' set run tool seconds
for run in $(seq 1 "$RUNS"); do
	for set in one hundred; do
		for tool in old new couchrestore; do
			wipe
			t0=$(now)
			case $tool in
			old) "$OLD" restore "$WORK/$set.sofa" "$TGT" -q ;;
			new) "$NEW" restore "$WORK/$set.sofa" "$TGT" -q ;;
			couchrestore) (cd "$ROOT" && node bench/couchrestore-all.js "$WORK/cb-$set" "$TGT" $(cat "$WORK/$set.names") >/dev/null) ;;
			esac
			t1=$(now)
			check "$set" "${n[$set]}" "${d[$set]}"
			printf '%-8s %-4s %-13s %8.2f\n' "$set" "$run" "$tool" "$(echo "$t1 - $t0" | bc)"
		done
	done
done
