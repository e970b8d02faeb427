#!/usr/bin/env bash
# DP-DFA (software noise) and DP-SGD at epsilon 1, 2, 4, 8 (delta 1e-5) with the same budget and
# the same settings (the main job's: 784-128-256-10 tanh, batch 2048, 60 epochs, Adam 3e-3;
# DP-DFA tau_e 0.05, tau_h 5; DP-SGD clip 1, Poisson sampling). One run each; records in
# results/tuning/, table printed at the end. Not a hyperparameter search: one setting per method.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
cd "$ROOT"
mkdir -p results/tuning
COMMON=(--delta 1e-5 --epochs 60 --batch-size 2048 --optimizer adam --lr 3e-3 --activation tanh --hidden 128,256 --quiet)
for eps in 1 2 4 8; do
  OMP_NUM_THREADS=1 opu-hal train --method dp-dfa --noise-source software --target-epsilon "$eps" --tau-h 5 --tau-e 0.05 \
    "${COMMON[@]}" --out "results/tuning/dp-dfa-eps$eps.json" 2>&1 | grep -E "test accuracy|error" &
  OMP_NUM_THREADS=1 opu-hal train --method dp-sgd --target-epsilon "$eps" \
    "${COMMON[@]}" --out "results/tuning/dp-sgd-eps$eps.json" 2>&1 | grep -E "test accuracy|error" &
  wait
done
opu-hal table results/tuning/dp-dfa-eps*.json results/tuning/dp-sgd-eps*.json
