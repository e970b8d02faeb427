#!/usr/bin/env bash
# The main job, end to end: a private DP-DFA run on real FashionMNIST whose noise is made of
# photo-electron counts drawn from the simulated OPU (the lattice Skellam mechanism, issue 12),
# within (epsilon 8, delta 1e-5); prints the test accuracy, the privacy spent, the mechanism, the
# noise source, the calibration and the generator, and writes results/main.json. First it
# calibrates the device (photon transfer, a few seconds): the privacy counts are then planned with
# the calibration's lower bound on an anchor read, never the model's own value. The network reads
# ScatterNet features (a fixed wavelet transform, no privacy cost; computed once, about a minute,
# then cached). Extra arguments go
# to `opu-hal train` (e.g. --epochs 15).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
PROFILE="${OPU_HAL_PROFILE:-opu-sim-dp}"
CALIBRATION="results/calibration/main-$(basename "$PROFILE" .toml).json"
opu-hal calibrate "$PROFILE" --temperatures 25 --exposures 400 --out "$CALIBRATION" --quiet | tail -n 3
exec opu-hal train --method dp-dfa --noise-source device --profile "$PROFILE" --calibration "$CALIBRATION" \
  --features scatter --hidden 256 --target-epsilon 8 --delta 1e-5 --epochs 20 --batch-size 2048 \
  --optimizer adam --lr 1.5e-3 --activation tanh --tau-h 5 --tau-e 0.05 --lattice-resolution 23 \
  --out results/main.json "$@"
