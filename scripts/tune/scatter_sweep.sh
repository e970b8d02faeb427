#!/usr/bin/env bash
# DP-DFA against DP-SGD on ScatterNet features (--features scatter) at epsilon 1, 2, 4, 8 (delta
# 1e-5), the same search budget for both: two learning rates each, the pick made on the
# validation split (which no reported run trains on), the test accuracy reported. DP-DFA:
# 3969-256-10 tanh, software noise, batch 2048, 15 epochs, tau_h 5, tau_e 0.05, Adam lr 1.5e-3 or
# 3e-3. DP-SGD: a linear model 3969-10 (Tramer and Boneh's ScatterNet+linear), batch 2048, 20
# epochs, clip 0.1, Adam lr 2e-3 or 4e-3. Records in results/tuning/scatter/, table at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/scatter
COMMON=(--features scatter --delta 1e-5 --batch-size 2048 --optimizer adam --quiet)
for eps in 1 2 4 8; do
  for lr in 1.5e-3 3e-3; do
    OMP_NUM_THREADS=1 opu-hal train --method dp-dfa --noise-source software --target-epsilon "$eps" --hidden 256 \
      --activation tanh --tau-h 5 --tau-e 0.05 --epochs 15 --lr "$lr" "${COMMON[@]}" \
      --out "$OUT/dp-dfa-eps$eps-lr$lr.json" 2>&1 | grep -E "test accuracy|rror" &
  done
  wait
  for lr in 2e-3 4e-3; do
    OMP_NUM_THREADS=1 opu-hal train --method dp-sgd --target-epsilon "$eps" --hidden "" --clip-norm 0.1 \
      --epochs 20 --lr "$lr" "${COMMON[@]}" --out "$OUT/dp-sgd-eps$eps-lr$lr.json" 2>&1 | grep -E "test accuracy|rror" &
  done
  wait
done
python -m trainers.cli.best_by_validation "$OUT"/*.json
