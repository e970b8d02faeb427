#!/usr/bin/env bash
# Paper 003 (DP-MAC) on MNIST with fixed bounds: Table 2's classifier as in paper003_mnist.sh (300-100
# softplus, batch 50, Adam 0.003, W's rate times 0.9 an epoch, 20 epochs, pixels), but the bound
# T_b fixed (`--opt bounds=fixed --opt t_b=X`) instead of learned from DP histograms. Every learned
# bound of paper003_mnist.sh came back at the paper's T_b^max = 0.1, so the histograms (epsilon 0.32
# at sigma_hist 20) bought nothing; here the whole budget goes to training.
# For each epsilon of EPSILONS (default "0.5 1 2") and T_b of TBS (default "0.1 0.01 0.001 0.0001"): one run
# on the training split (54 000 images); the T_b picked on the validation split (6 000 images no run
# trains on) by trainers.cli.best_by_validation. The pick among TBS is NOT paid for: each figure is
# one run's epsilon. PARALLEL runs at a time (default 2), one thread each.
# Records in OUT_DIR (default results/paper003-mnist-fixed)/eps<e>-tb<X>.json; an existing record is kept.
# OPU_HAL_PYTHON=/path/to/python skips the venv set-up and runs `python -m trainers.cli`.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/prologue.sh"  # HERE, ROOT, PY, opu-hal; cd "$ROOT"
OUT="${OUT_DIR:-results/paper003-mnist-fixed}"
mkdir -p "$OUT"
EPSILONS="${EPSILONS:-0.5 1 2}"
TBS="${TBS:-0.1 0.01 0.001 0.0001}"
PARALLEL="${PARALLEL:-2}"
PAPER=(--method dp-mac --dataset mnist --features pixels --hidden 300,100 --activation softplus
  --lr-schedule decay-0.9 --weight-average 0 --batch-size 50 --epochs "${EPOCHS:-20}" --lr 3e-3
  --opt bounds=fixed --quiet)
run() {  # epsilon t_b: one record, its test line prefixed with its name
  local record="$OUT/eps$1-tb$2.json"
  [ -s "$record" ] && { echo "$record: kept (record exists)"; return; }
  OMP_NUM_THREADS=1 opu-hal train "${PAPER[@]}" --target-epsilon "$1" --opt "t_b=$2" --out "$record" 2>&1 |
    grep -E "test accuracy|rror" | sed "s|^|$record: |"
}
for eps in $EPSILONS; do
  for tb in $TBS; do
    while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
    run "$eps" "$tb" &
  done
done
wait
for eps in $EPSILONS; do
  records=()
  for tb in $TBS; do [ -s "$OUT/eps$eps-tb$tb.json" ] && records+=("$OUT/eps$eps-tb$tb.json"); done
  [ "${#records[@]}" -gt 0 ] || continue
  echo "epsilon $eps: pick on validation $("$PY" -m trainers.cli.best_by_validation --name "${records[@]}")"
done
"$PY" -m trainers.cli.best_by_validation "$OUT"/*.json
