#!/usr/bin/env bash
# DP-SGD at (epsilon 3, delta 1e-5) on ScatterNet features (v3: kymatio's low-pass), Tramer and
# Boneh's ScatterNet+linear: a linear model 3969-10, clip 0.1, Poisson sampling, batch 8192
# (expected), SGD with momentum 0.9, weight average 0.9 (issue 35). Four candidates, run on the
# training split (54 000 images); the pick is made on the validation split (6 000 images, which no
# candidate trains on) by trainers.best_by_validation and run again. Then the final run: the pick's
# settings with --validation-fraction 0, on all 60 000 images (its validation figures are empty),
# twice. Records in results/tuning/dp-sgd-eps3-v3/; about 15 min on 2 cores.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/dp-sgd-eps3-v3
COMMON=(--method dp-sgd --features scatter --hidden "" --clip-norm 0.1 --batch-size 8192 --optimizer sgd
        --momentum 0.9 --weight-average 0.9 --inputs unit --target-epsilon 3 --delta 1e-5 --quiet)
CANDIDATES=("e50-lr16|--epochs 50 --lr 16"
            "e50-lr8|--epochs 50 --lr 8"
            "e80-lr8|--epochs 80 --lr 8"
            "e30-lr16|--epochs 30 --lr 16")
for i in 0 2; do
  for candidate in "${CANDIDATES[@]:$i:2}"; do run_candidate "${candidate%%|*}" ${candidate#*|} & done
  wait
done
python -m trainers.best_by_validation "$OUT"/e*[0-9].json
pick=$(python -m trainers.best_by_validation --name "$OUT"/e*[0-9].json)
for candidate in "${CANDIDATES[@]}"; do
  if [[ "${candidate%%|*}" == "$pick" ]]; then
    run_candidate "$pick-repeat" ${candidate#*|} &
    run_candidate "$pick-final-60k" ${candidate#*|} --validation-fraction 0 & wait
    run_candidate "$pick-final-60k-repeat" ${candidate#*|} --validation-fraction 0
  fi
done
