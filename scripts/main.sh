#!/usr/bin/env bash
# The main job, end to end: load the default simulated-or-torch profile and project a batch.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
exec opu-hal project "${OPU_HAL_PROFILE:-torch-cpu}" "$@"
