#!/usr/bin/env bash
# Placeholder: the demo is not written yet.
set -euo pipefail
echo "demo: not implemented yet" >&2
exit 1
