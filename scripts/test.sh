#!/usr/bin/env bash
# The whole test suite (arguments go to pytest).
# With no arguments (CI, the README's command) the files are shared among one pytest-xdist worker per
# core (OPU_HAL_TEST_WORKERS overrides the count); each file stays on one worker (--dist loadfile), so
# a module's fixtures are built once. Named files or options run in one process, as given.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
if [ $# -eq 0 ]; then
  set -- -n "${OPU_HAL_TEST_WORKERS:-auto}" --dist loadfile
fi
exec python -m pytest -q "$@"
