#!/usr/bin/env bash
# The main job, end to end: a private DP-DFA run on real FashionMNIST whose noise is made of
# photo-electron counts drawn from the simulated OPU (the lattice Skellam mechanism), with its
# settings chosen privately by `opu-hal tune`: two candidates drawn from the search space, public
# and composed (Papernot and Steinke 2022's Algorithm 1 with K = 2 fixed), scored on the validation
# split; the selected candidate's own run is what the job publishes (Algorithm 1's output,
# `--release best-candidate`: no final run), so the two runs together stay within (epsilon 8,
# delta 1e-5), and each can train 30 epochs. K is public, so the job's duration and its files'
# times tell nothing secret: 2 runs in all. Prints the selected settings, that run's test accuracy,
# the epsilon of one run and of the tuning (the total), the mechanism, the noise source, the
# calibration and the generator, and writes results/main.json. First it calibrates the device (photon transfer, a few seconds): the privacy
# counts are then planned with the calibration's lower bound on an anchor read, never the model's
# own value. The network reads ScatterNet features (a fixed wavelet transform, no privacy cost;
# computed once, about a minute, then cached). Batches are Poisson-sampled (each example joins a batch
# with probability 2048 / 54000; add/remove neighbours, the FashionMNIST training split's size public),
# and the lattice resolution 36 makes one anchor read per count spend each run's share of the budget.
# Extra arguments go to `opu-hal tune` (e.g. --epochs 15).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
PROFILE="${OPU_HAL_PROFILE:-opu-sim-dp}"
CALIBRATION="results/calibration/main-$(basename "$PROFILE" .toml).json"
opu-hal calibrate "$PROFILE" --temperatures 25 --exposures 400 --out "$CALIBRATION" | tail -n 3
exec opu-hal tune --method dp-dfa --noise-source device --profile "$PROFILE" --calibration "$CALIBRATION" \
  --features scatter --hidden 256 --total-epsilon 8 --delta 1e-5 --epochs 30 --batch-size 2048 \
  --optimizer adam --activation tanh --tau-h 5 --tau-e 0.05 --sampling poisson --public-dataset-size 54000 \
  --lattice-resolution 36 \
  --space lr=1.5e-3,3e-3 --space lr_schedule=constant,cosine --k-distribution fixed --mean-runs 2 \
  --release best-candidate --out results/main.json "$@"
