#!/usr/bin/env bash
# Issue 49's MNIST row at (epsilon 3, delta 1e-5): does Tramer and Boneh's ScatterNet CNN (its wider
# 32, 64 variant: 3x3 convs at strides 2 and 1, a 32-wide tanh hidden layer) lift DP-SGD above the
# ScatterNet+linear record (98.58 %)? Centred features, PLD accounting, clip 0.1, batch 8192, 60 epochs,
# Adam at two learning rates (4e-3 was the FashionMNIST sweep's pick), weight averaging 0.9; one run
# after the other on one thread (about 30 min each on the 2-core machine with another job beside it).
# Unpaid exploration, not a record row. Records in $SWEEP_OUT (default results/tuning/mnist-scatter-cnn/).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/mnist-scatter-cnn
COMMON=(--method dp-sgd --dataset mnist --model cnn --features scatter --center-features --target-epsilon 3
        --delta 1e-5 --accounting pld --clip-norm 0.1 --activation tanh --conv-strides 2,1 --head-hidden 32
        --hidden 32,64 --batch-size 8192 --epochs 60 --optimizer adam --weight-average 0.9 --no-alignment --quiet)
for lr in 4e-3 8e-3; do
  run_candidate "c32-64-b8192-e60-lr$lr-avg" --lr "$lr"
done
python -m trainers.cli.best_by_validation "$OUT"/*.json
