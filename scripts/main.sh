#!/usr/bin/env bash
# The main job, end to end: load the default simulated OPU profile, project a batch, print the
# projection shape and the noise report (later: a private training run on the simulated OPU).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
exec opu-hal project "${OPU_HAL_PROFILE:-opu-sim}" "$@"
