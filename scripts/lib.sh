# Shared shell helpers for demo.sh and bench.sh: start and stop in-memory
# PouchDB Servers on free loopback ports. Source this file.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIDS=()
DIRS=()

cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
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
