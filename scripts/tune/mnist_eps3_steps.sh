#!/usr/bin/env bash
# MNIST, DP-SGD at epsilon 3 (delta 1e-5, PLD): the record's ScatterNet+linear options (scripts/records/
# dp_sgd_rows.sh) with more steps, larger batches and other rates than its three candidates. Six runs on
# the training split, two at a time, one thread each; unpaid, not records. Records in SWEEP_OUT (default
# results/tuning/mnist-eps3-steps).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/mnist-eps3-steps
COMMON=(--method dp-sgd --dataset mnist --features scatter --center-features --hidden "" --clip-norm 0.1
        --optimizer sgd --momentum 0.9 --inputs unit --weight-average 0.9 --delta 1e-5 --accounting pld
        --target-epsilon 3 --quiet)
pair() {  # two candidates at once: NAME1 "OPTIONS1" NAME2 "OPTIONS2"
  run_candidate "$1" $2 & run_candidate "$3" $4 & wait
}
pair b16384-e120-lr16 "--batch-size 16384 --epochs 120 --lr 16" b32768-e120-lr16 "--batch-size 32768 --epochs 120 --lr 16"
pair b16384-e60-lr32 "--batch-size 16384 --epochs 60 --lr 32" b32768-e200-lr16 "--batch-size 32768 --epochs 200 --lr 16"
pair b16384-e60-lr8 "--batch-size 16384 --epochs 60 --lr 8" b32768-e120-lr32 "--batch-size 32768 --epochs 120 --lr 32"
python -m trainers.cli.best_by_validation "$OUT"/*.json
