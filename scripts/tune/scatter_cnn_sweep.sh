#!/usr/bin/env bash
# Issue 19's small CNN at (epsilon 3, delta 1e-5): DP-SGD on ScatterNet features with Tramer and
# Boneh's ScatterNet CNN (3x3 convs of 16 channels at stride 2 and 32 at stride 1, a 32-wide tanh
# hidden layer, then 10; --conv-strides 2,1 --head-hidden 32) and its wider variant (32, 64),
# clip 0.1, batch 8192, Adam (one run SGD with momentum 0.9, as theirs). Two runs at a time on
# the 2-core machine; the pick is made on the validation split (python -m
# trainers.cli.best_by_validation), which no run trains on. Eight runs, about 45 min. Records in
# $SWEEP_OUT (default results/tuning/scatter-tb-cnn/).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/scatter-tb-cnn
COMMON=(--method dp-sgd --model cnn --features scatter --target-epsilon 3 --delta 1e-5 --clip-norm 0.1
        --activation tanh --conv-strides 2,1 --head-hidden 32 --batch-size 8192
        --compute "${COMPUTE:-cpu}" --no-alignment --quiet)
run() {  # name channels epochs lr [optimizer]
  OMP_NUM_THREADS=1 opu-hal train "${COMMON[@]}" --hidden "$2" --epochs "$3" --lr "$4" --optimizer "${5:-adam}" \
    --out "$OUT/$1.json" 2>&1 \
    | grep -E "test accuracy|rror" | sed "s/^/$1: /"
}
run tb16-32-e60-lr8e-3 16,32 60 8e-3 & run tb16-32-e60-lr4e-3 16,32 60 4e-3 & wait
run tb32-64-e60-lr8e-3 32,64 60 8e-3 & run tb16-32-e100-lr8e-3 16,32 100 8e-3 & wait
# second round, after the first showed the lower learning rate ahead
run tb16-32-e60-lr2e-3 16,32 60 2e-3 & run tb16-32-e40-lr4e-3 16,32 40 4e-3 & wait
run tb16-32-e60-sgd1 16,32 60 1 sgd & run tb32-64-e60-lr4e-3 32,64 60 4e-3 & wait
python -m trainers.cli.best_by_validation "$OUT"/*.json
