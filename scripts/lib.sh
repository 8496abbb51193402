# Shared shell helpers for demo.sh and bench.sh: start and stop in-memory
# PouchDB Servers, or Apache CouchDB instances from the release beside the
# repository, on free loopback ports. Source this file.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIDS=()
DIRS=()

COUCH_DIRS=()

cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for d in "${COUCH_DIRS[@]:-}"; do [ -n "$d" ] && bash "$(dirname "$COUCH_START")/stop.sh" "$d" >/dev/null 2>&1 || true; done
	for d in "${DIRS[@]:-}"; do [ -n "$d" ] && rm -rf "$d"; done
}
trap cleanup EXIT

free_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# start_server VAR: starts pouchdb-server in memory, sets VAR to its URL.
start_server() {
	local var=$1 port dir
	port=$(free_port)
	dir=$(mktemp -d)
	DIRS+=("$dir")
	(cd "$dir" && exec "$ROOT/node_modules/.bin/pouchdb-server" --in-memory --host 127.0.0.1 --port "$port" -n >"$dir/out.log" 2>&1) &
	PIDS+=($!)
	local url="http://127.0.0.1:$port"
	for _ in $(seq 1 100); do
		if node -e "fetch('$url/').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))" 2>/dev/null; then
			printf -v "$var" '%s' "$url"
			return 0
		fi
		sleep 0.2
	done
	echo "could not start pouchdb-server (see $dir/out.log)" >&2
	cat "$dir/out.log" >&2
	return 1
}

# couchdb_release prints the CouchDB release to start: SOFA_COUCHDB_RELEASE,
# else the newest couchdb-*.tar.gz in ../shared/couchdb; nothing (status 1)
# when there is none.
couchdb_release() {
	if [ -n "${SOFA_COUCHDB_RELEASE:-}" ]; then
		echo "$SOFA_COUCHDB_RELEASE"
		return 0
	fi
	local r
	r=$(ls "$ROOT"/../shared/couchdb/couchdb-*.tar.gz 2>/dev/null | sort | tail -n 1)
	[ -n "$r" ] && echo "$r"
}
COUCH_START="$ROOT/../shared/couchdb/start.sh"

# start_couchdb VAR: starts a single-node CouchDB from couchdb_release with
# start.sh (its own data directory, a free loopback port, admin
# admin:admin, [log] level = warning), sets VAR to its URL (credentials
# included). Stopped on exit.
start_couchdb() {
	local var=$1 port dir ini url
	port=$(free_port)
	dir=$(mktemp -d)
	DIRS+=("$dir")
	COUCH_DIRS+=("$dir")
	ini="$dir/extra.ini"
	printf '[log]\nlevel = warning\n' >"$ini"
	if ! url=$(COUCHDB_EXTRA_INI="$ini" bash "$COUCH_START" "$(couchdb_release)" "$dir" "$port" | tail -n 1); then
		echo "could not start CouchDB (see $dir/couchdb.log)" >&2
		return 1
	fi
	printf -v "$var" '%s' "${url%/}"
}
