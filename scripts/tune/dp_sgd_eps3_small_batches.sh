#!/usr/bin/env bash
# DP-SGD at epsilon 3 (delta 1e-5, PLD): the record's ScatterNet+linear options (scripts/records/
# dp_sgd_rows.sh) at smaller batches than its first three candidates, the rate scaled with the batch:
# Tramer and Boneh's published MNIST setting (batch 4096, lr 8, their README), half and a quarter of it,
# and FashionMNIST at 4096. Runs on the training split, two at a time, one thread each; unpaid, not
# records (two of them became record candidates at epsilon 3). Records in SWEEP_OUT (default
# results/tuning/dp-sgd-eps3-small-batches).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/dp-sgd-eps3-small-batches
COMMON=(--method dp-sgd --features scatter --center-features --hidden "" --clip-norm 0.1 --optimizer sgd
        --momentum 0.9 --inputs unit --weight-average 0.9 --delta 1e-5 --accounting pld --target-epsilon 3 --quiet)
pair() {  # two candidates at once: NAME1 "OPTIONS1" NAME2 "OPTIONS2"
  run_candidate "$1" $2 & run_candidate "$3" $4 & wait
}
M="--dataset mnist"
pair mnist-eps3-b4096-e40-lr8 "$M --batch-size 4096 --epochs 40 --lr 8" mnist-eps3-b4096-e40-lr8-repeat "$M --batch-size 4096 --epochs 40 --lr 8"
pair mnist-eps3-b2048-e40-lr4 "$M --batch-size 2048 --epochs 40 --lr 4" mnist-eps3-b2048-e40-lr4-repeat "$M --batch-size 2048 --epochs 40 --lr 4"
pair mnist-eps3-b4096-e60-lr8 "$M --batch-size 4096 --epochs 60 --lr 8" mnist-eps3-b4096-e40-lr16 "$M --batch-size 4096 --epochs 40 --lr 16"
pair mnist-eps3-b1024-e40-lr2 "$M --batch-size 1024 --epochs 40 --lr 2" mnist-eps3-b2048-e60-lr4 "$M --batch-size 2048 --epochs 60 --lr 4"
pair mnist-eps3-b2048-e40-lr8 "$M --batch-size 2048 --epochs 40 --lr 8" fmnist-eps3-b4096-e30-lr8 "--dataset fashion-mnist --batch-size 4096 --epochs 30 --lr 8"
run_candidate fmnist-eps3-b4096-e40-lr8 --dataset fashion-mnist --batch-size 4096 --epochs 40 --lr 8
python -m trainers.cli.best_by_validation "$OUT"/mnist-*.json
