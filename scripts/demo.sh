#!/usr/bin/env bash
# The main job end to end on real data: start two Apache CouchDB instances
# from the release in ../shared/couchdb (or SOFA_COUCHDB_RELEASE; without
# one, or with DEMO_SERVER=pouchdb, in-memory PouchDB Servers), load public
# data into the first (one database per country with its flag and cities,
# all cities, emoji with sprite sheets), replicate the whole server to the
# second with sofa, replicate again (nothing to do), verify that every
# database is equal, then back the server up into one archive, restore it
# into a third server and verify that too.
#   SCALE=0.1 make demo     # a smaller data set
set -euo pipefail
source "$(dirname "$0")/lib.sh"
SCALE=${SCALE:-1}
SOFA="$ROOT/bin/sofa"
[ -x "$SOFA" ] || (cd "$ROOT" && go build -o bin/sofa ./cmd/sofa)
(cd "$ROOT" && go build -o bin/sofa-load ./cmd/sofa-load)

kind=${DEMO_SERVER:-couchdb}
if [ "$kind" = couchdb ] && [ -z "$(couchdb_release)" ]; then
	echo "== no CouchDB release in ../shared/couchdb (nor SOFA_COUCHDB_RELEASE): the demo runs on PouchDB Server"
	kind=pouchdb
fi
server() { if [ "$kind" = couchdb ]; then start_couchdb "$1"; else start_server "$1"; fi; }
echo "== starting $kind servers"
server SRC
server DST
# URLs without their credentials, for what the demo prints.
bare() { sed -E 's#//[^/@]*@#//#' <<<"$1"; }
echo "== source $(bare "$SRC"), target $(bare "$DST")"
echo "== loading real data (scale $SCALE) into the source"
"$ROOT/bin/sofa-load" --target "$SRC" --set real --scale "$SCALE"

echo "== sofa replicate $(bare "$SRC") $(bare "$DST")"
"$SOFA" replicate "$SRC" "$DST"
echo "== second run: nothing left to copy"
"$SOFA" replicate "$SRC" "$DST" --quiet
echo "== sofa verify --full $(bare "$SRC") $(bare "$DST")"
"$SOFA" verify --full "$SRC" "$DST"

if "$SOFA" help backup >/dev/null 2>&1; then
	server RESTORED
	ARCHIVE=$(mktemp -d)/demo.sofa
	DIRS+=("$(dirname "$ARCHIVE")")
	echo "== sofa backup $(bare "$SRC") $ARCHIVE"
	"$SOFA" backup "$SRC" "$ARCHIVE"
	ls -l "$ARCHIVE"
	"$SOFA" verify "$ARCHIVE"
	echo "== sofa restore $ARCHIVE $(bare "$RESTORED")"
	"$SOFA" restore "$ARCHIVE" "$RESTORED"
	"$SOFA" verify --full "$SRC" "$RESTORED"
fi
echo "== demo finished: every copy is equal"
