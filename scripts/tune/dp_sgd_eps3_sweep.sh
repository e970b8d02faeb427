#!/usr/bin/env bash
# DP-SGD at (epsilon 3, delta 1e-5) on ScatterNet features (v3: kymatio's low-pass) centred on a
# Gaussian release of their training mean (--center-features, noise multiplier 20, charged to the
# same ledger), Tramer and Boneh's ScatterNet+linear otherwise: a linear model 3969-10, clip 0.1,
# Poisson sampling, batch 8192 (expected), SGD 16 with momentum 0.9, weight average (issue 35).
# ACCOUNTING=pld (default) plans and reports with --accounting pld, ACCOUNTING=rdp with RDP alone.
# Four candidates, run on the training split (54 000 images); the pick is made on the validation
# split (6 000 images, which no candidate trains on) by trainers.cli.best_by_validation and run again.
# Then the final run: the pick's settings with --validation-fraction 0, on all 60 000 images (its
# validation figures are empty), twice. Records in results/tuning/dp-sgd-eps3-centered-$ACCOUNTING/;
# about 12 min on 2 cores.
set -euo pipefail
ACCOUNTING="${ACCOUNTING:-pld}"
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" "results/tuning/dp-sgd-eps3-centered-$ACCOUNTING"
COMMON=(--method dp-sgd --features scatter --center-features --hidden "" --clip-norm 0.1 --batch-size 8192
        --optimizer sgd --momentum 0.9 --lr 16 --inputs unit --target-epsilon 3 --delta 1e-5 --accounting "$ACCOUNTING" --quiet)
CANDIDATES=("e30-avg0.9|--epochs 30 --weight-average 0.9"
            "e30-avg0.95|--epochs 30 --weight-average 0.95"
            "e40-avg0.9|--epochs 40 --weight-average 0.9"
            "b16384-e60-avg0.9|--epochs 60 --batch-size 16384 --weight-average 0.9")
for i in 0 2; do
  for candidate in "${CANDIDATES[@]:$i:2}"; do run_candidate "${candidate%%|*}" ${candidate#*|} & done
  wait
done
python -m trainers.cli.best_by_validation "$OUT"/[eb]*[0-9].json
pick=$(python -m trainers.cli.best_by_validation --name "$OUT"/[eb]*[0-9].json)
for candidate in "${CANDIDATES[@]}"; do
  if [[ "${candidate%%|*}" == "$pick" ]]; then
    run_candidate "$pick-repeat" ${candidate#*|} &
    run_candidate "$pick-final-60k" ${candidate#*|} --validation-fraction 0 & wait
    run_candidate "$pick-final-60k-repeat" ${candidate#*|} --validation-fraction 0
  fi
done
