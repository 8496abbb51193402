#!/usr/bin/env bash
# Installs the Debian packages of the s3 benchmark's peers (awscli for
# `aws s3 cp`, rclone), for scripts/bench.sh only (no test needs them),
# when they are missing and apt-get can be used (root). Elsewhere, or when
# the install fails, it says so and goes on: the benchmark then skips that
# peer with a line saying why.
set -uo pipefail
missing=""
command -v aws >/dev/null 2>&1 || missing="$missing awscli"
command -v rclone >/dev/null 2>&1 || missing="$missing rclone"
[ -z "$missing" ] && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	echo "bench: installing Debian packages for the s3 peers:$missing"
	for p in $missing; do
		apt-get install -y -qq "$p" >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "$p" >/dev/null 2>&1; } ||
			echo "bench: could not install $p; the s3 benchmark skips it" >&2
	done
else
	echo "bench: note: missing$missing (Debian packages); the s3 benchmark skips them" >&2
fi
exit 0
