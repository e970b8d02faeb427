#!/usr/bin/env bash
# Issue 19's small CNN at (epsilon 3, delta 1e-5) on ScatterNet features, DP-SGD, searched on a GPU
# (all runs at once, --compute cuda): 3x3 conv channels, batch size, epochs and Adam's learning
# rate around the 2-core machine's best (32 channels, batch 8192, 60 epochs, lr 8e-3: 87.99%).
# The pick is made on the validation split (python -m trainers.cli.best_by_validation), which no
# reported run trains on; records in $SWEEP_OUT (default results/tuning/scatter-cnn-gpu/).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/scatter-cnn-gpu
COMMON=(--method dp-sgd --model cnn --features scatter --target-epsilon 3 --delta 1e-5 --clip-norm 0.1
        --activation tanh --optimizer adam --compute cuda --no-alignment --quiet)
run() {  # name channels batch epochs lr
  OMP_NUM_THREADS=2 timeout "${RUN_LIMIT_S:-400}" opu-hal train "${COMMON[@]}" --hidden "$2" --batch-size "$3" \
    --epochs "$4" --lr "$5" --out "$OUT/$1.json" 2>&1 | grep -E "test accuracy|rror" | sed "s/^/$1: /" &
}
run cnn32-b8192-e60-lr8e-3 32 8192 60 8e-3
run cnn32-b8192-e100-lr8e-3 32 8192 100 8e-3
run cnn64-b8192-e100-lr8e-3 64 8192 100 8e-3
run cnn32-b16384-e120-lr1.2e-2 32 16384 120 1.2e-2
run cnn32x32-b8192-e100-lr8e-3 32,32 8192 100 8e-3
run cnn32-b8192-e100-lr4e-3 32 8192 100 4e-3
run cnn64-b16384-e120-lr1.2e-2 64 16384 120 1.2e-2
wait
python -m trainers.cli.best_by_validation "$OUT"/*.json
