#!/usr/bin/env bash
# Installs the Debian packages the CouchDB release in ../shared/couchdb needs
# at run time (see its README), when they are missing and apt-get can be
# used (root). Elsewhere it says what is missing and goes on: tests then
# run on PouchDB Server alone or on SOFA_COUCHDB_URL.
set -uo pipefail
# curl: ../shared/couchdb/start.sh, which make demo uses, polls with it.
pkgs="libicu72 libssl3 libstdc++6 zlib1g libtinfo6 curl"
missing=""
for p in $pkgs; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	echo "installing Debian packages for CouchDB:$missing"
	apt-get update -qq && apt-get install -y -qq $missing >/dev/null
else
	echo "note: CouchDB's runtime packages are missing ($missing); install them to run the CouchDB tests" >&2
fi
