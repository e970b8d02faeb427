#!/usr/bin/env bash
# The main job, end to end: a private DP-DFA run on real FashionMNIST whose Gaussian noise is
# drawn from the simulated OPU's own measurement noise, within (epsilon 8, delta 1e-5); prints
# the test accuracy and the privacy spent, writes results/main.json. Extra arguments go to
# `opu-hal train` (e.g. --epochs 15).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
exec opu-hal train --method dp-dfa --noise-source device --profile "${OPU_HAL_PROFILE:-opu-sim}" \
  --target-epsilon 8 --delta 1e-5 --epochs 3 --out results/main.json "$@"
