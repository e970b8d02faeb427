#!/usr/bin/env bash
# The whole test suite (arguments go to pytest).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
exec python -m pytest -q "$@"
