#!/usr/bin/env bash
# Placeholder: the benchmark is not written yet.
set -euo pipefail
echo "bench: not implemented yet" >&2
exit 1
