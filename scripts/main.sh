#!/usr/bin/env bash
# The main job, end to end: a private DP-DFA run on real FashionMNIST whose noise is made of
# photo-electron counts drawn from the simulated OPU (the lattice Skellam mechanism, issue 12),
# with its settings chosen privately by `opu-hal tune` (Papernot and Steinke 2022: the best of a
# secret random number K of runs on the validation split, K geometric with mean 2), the tuning and
# the final run together within (epsilon 8, delta 1e-5) (issue 35). K is conditioned on K <= 32 and
# all 32 candidate slots train whatever K is, so the job's duration does not tell K (issue 44): 33
# runs in all. Prints the selected settings,
# the final run's test accuracy, the epsilon of one run, of the tuning and in total, the mechanism,
# the noise source, the calibration and the generator, and writes results/main.json. First it
# calibrates the device (photon transfer, a few seconds): the privacy counts are then planned with
# the calibration's lower bound on an anchor read, never the model's own value. The network reads
# ScatterNet features (a fixed wavelet transform, no privacy cost; computed once, about a minute,
# then cached). Extra arguments go to `opu-hal tune` (e.g. --epochs 15).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
PROFILE="${OPU_HAL_PROFILE:-opu-sim-dp}"
CALIBRATION="results/calibration/main-$(basename "$PROFILE" .toml).json"
opu-hal calibrate "$PROFILE" --temperatures 25 --exposures 400 --out "$CALIBRATION" | tail -n 3
exec opu-hal tune --method dp-dfa --noise-source device --profile "$PROFILE" --calibration "$CALIBRATION" \
  --features scatter --hidden 256 --total-epsilon 8 --delta 1e-5 --epochs 20 --batch-size 2048 \
  --optimizer adam --activation tanh --tau-h 5 --tau-e 0.05 --lattice-resolution 23 \
  --space lr=1.5e-3,3e-3 --space lr_schedule=constant,cosine --mean-runs 2 \
  --out results/main.json "$@"
