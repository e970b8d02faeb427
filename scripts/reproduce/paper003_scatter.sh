#!/usr/bin/env bash
# Paper 003 (DP-MAC) on MNIST at epsilon in EPSILONS (default "0.5 1 2"), delta 1e-5, on ScatterNet
# features of the pixels (no public data): DP-MAC at its defaults (TrainConfig.for_method('dp-mac'):
# Table 2's 300-100 softplus classifier, batch 50, Adam 0.003, 3 epochs, cosine rate, weight average
# 0.99, fixed bound T_b 1e-3, chosen on FashionMNIST's validation split, not on MNIST), and DP-SGD with
# the same features, network, batch, optimizer, schedule and epochs at the same epsilon (inverse
# accounting for each; Poisson batches for DP-SGD). No setting was tuned on MNIST.
# For each epsilon and seed of SEEDS (default "0"): two runs, PARALLEL at a time (default 2), one
# thread each. Records in OUT_DIR (default results/paper003-mnist-scatter)/<method>-eps<e>-seed<s>.json;
# an existing record is kept. OPU_HAL_PYTHON=/path/to/python skips the venv set-up.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/prologue.sh"  # HERE, ROOT, PY, opu-hal; cd "$ROOT"
out_dir results/paper003-mnist-scatter
EPSILONS="${EPSILONS:-0.5 1 2}" SEEDS="${SEEDS:-0}" PARALLEL="${PARALLEL:-2}"
SHARED=(--dataset mnist --features scatter --hidden 300,100 --activation softplus --batch-size 50 --lr 3e-3
  --optimizer adam --epochs 3 --lr-schedule cosine --weight-average 0.99 --delta 1e-5 --quiet)
run() {  # method epsilon seed: one record, its test line prefixed with its name
  local record="$OUT/$1-eps$2-seed$3.json"
  [ -s "$record" ] && { echo "$record: kept (record exists)"; return; }
  OMP_NUM_THREADS=1 opu-hal train --method "$1" "${SHARED[@]}" --target-epsilon "$2" --seed "$3" --out "$record" 2>&1 |
    grep -E "test accuracy|rror" | sed "s|^|$record: |"
}
for seed in $SEEDS; do
  for eps in $EPSILONS; do
    for method in dp-mac dp-sgd; do
      while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
      run "$method" "$eps" "$seed" &
    done
  done
done
wait
"$PY" -m trainers.cli.best_by_validation "$OUT"/*.json
