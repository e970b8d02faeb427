#!/usr/bin/env bash
# Paper 003 (DP-MAC), Table 1(a) on its own data (MNIST) at epsilon in EPSILONS (default
# "0.5 1 2"; the paper's MNIST rows are 0.5 and 2), delta 1e-5: Table 2's classifier (300-100
# softplus, batch 50, Adam 0.003, 20 z-steps at lr 0.01, T_z = T_w = 30, T_b^max = 0.1, bounds from
# the DP histograms: sigma_hist 20, 20 bins, one pre-training epoch), 20 epochs (EPOCHS).
# DP-MAC's noise multiplier comes from mac_noise.py: the smallest sigma whose whole run (three
# histograms, the pre-training epoch and the training epochs, one ledger) spends the target
# (`--target-epsilon` plans the same whole run; tests/test_dp_mac_target.py checks the two agree). DP-SGD with the same
# network, batch and optimizer at the epsilon DP-MAC spent (inverse accounting, Poisson batches).
# W's learning rate times 0.9 after each epoch as the paper's (LR_SCHEDULE=constant for the earlier
# rows), no weight average, pixels.
# QUICK=1: one epoch on 5,000 training examples at the first epsilon (a plumbing check).
# OUT_DIR (default results/paper003-mnist); SEED (default 0). PARALLEL=1 runs each epsilon's two
# runs at once, DP-SGD at the epsilon DP-MAC's whole run spends at its sigma (mac_noise.py --spent).
# OPU_HAL_PYTHON=/path/to/python skips the venv set-up and runs `python -m trainers.cli`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/prologue.sh"  # HERE, ROOT, PY, opu-hal; cd "$ROOT"
OUT="${OUT_DIR:-results/paper003-mnist}"
mkdir -p "$OUT"
E="${EPOCHS:-20}"
EPSILONS="${EPSILONS:-0.5 1 2}"
TRAIN=54000 # MNIST's training split: 60,000 less the 10 % validation
LIMIT=()
if [ "${QUICK:-0}" = 1 ]; then E=1; TRAIN=5000; LIMIT=(--train-limit "$TRAIN"); EPSILONS="${EPSILONS%% *}"; fi
SEED="${SEED:-0}"
PAPER=(--dataset mnist --features pixels --hidden 300,100 --activation softplus --lr-schedule "${LR_SCHEDULE:-decay-0.9}"
  --weight-average 0 --batch-size 50 --epochs "$E" --seed "$SEED" --quiet "${LIMIT[@]}")
for eps in $EPSILONS; do
  read -r z planned < <("$PY" "$HERE/mac_noise.py" "$eps" --train "$TRAIN" --batch 50 --epochs "$E" --spent)
  mac="$OUT/dp-mac-eps$eps-seed$SEED.json"
  sgd=(opu-hal train --method dp-sgd "${PAPER[@]}" --optimizer adam --lr 0.003 --sampling poisson
    --out "$OUT/dp-sgd-eps$eps-seed$SEED.json")
  if [ "${PARALLEL:-0}" = 1 ]; then  # both at once, one thread each (two threads each oversubscribe 2 cores
    # about 4x at batch 50): DP-SGD at the epsilon DP-MAC's whole run will spend
    OMP_NUM_THREADS=1 "${sgd[@]}" --target-epsilon "$planned" &
    OMP_NUM_THREADS=1 opu-hal train --method dp-mac "${PAPER[@]}" --noise-multiplier "$z" --opt bounds=histogram --out "$mac"
    wait
  else
    opu-hal train --method dp-mac "${PAPER[@]}" --noise-multiplier "$z" --opt bounds=histogram --out "$mac"
    spent="$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['final']['epsilon'])" "$mac")"
    "${sgd[@]}" --target-epsilon "$spent"
  fi
done
opu-hal table "$OUT"/*.json
