#!/usr/bin/env bash
# The main job, end to end: a private DP-DFA run on real FashionMNIST whose noise is made of
# photo-electron counts drawn from the simulated OPU (the lattice Skellam mechanism), with its
# settings chosen privately by `opu-hal tune`: two candidates drawn from the search space, public
# and composed (Papernot and Steinke 2022's Algorithm 1 with K = 2 fixed), scored on the validation
# split, then the final run; the tuning and the final run together within (epsilon 8, delta 1e-5).
# K is public, so the job's duration and its files' times tell nothing secret: 3 runs in all. Prints
# the selected settings, the final run's test accuracy, the epsilon of one run, of the tuning and in
# total, the mechanism, the noise source, the calibration and the generator, and writes
# results/main.json. First it calibrates the device (photon transfer, a few seconds): the privacy
# counts are then planned with the calibration's lower bound on an anchor read, never the model's
# own value. The network reads ScatterNet features (a fixed wavelet transform, no privacy cost;
# computed once, about a minute, then cached). Extra arguments go to `opu-hal tune` (e.g. --epochs 15).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
PROFILE="${OPU_HAL_PROFILE:-opu-sim-dp}"
CALIBRATION="results/calibration/main-$(basename "$PROFILE" .toml).json"
opu-hal calibrate "$PROFILE" --temperatures 25 --exposures 400 --out "$CALIBRATION" | tail -n 3
exec opu-hal tune --method dp-dfa --noise-source device --profile "$PROFILE" --calibration "$CALIBRATION" \
  --features scatter --hidden 256 --total-epsilon 8 --delta 1e-5 --epochs 20 --batch-size 2048 \
  --optimizer adam --activation tanh --tau-h 5 --tau-e 0.05 --lattice-resolution 23 \
  --space lr=1.5e-3,3e-3 --space lr_schedule=constant,cosine --k-distribution fixed --mean-runs 2 \
  --out results/main.json "$@"
