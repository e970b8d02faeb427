#!/usr/bin/env bash
# Paper 004 (DP-ULR), Table 1 on its own data (MNIST): MLP 128-64-32-10 GELU, C = 1, delta 1e-5,
# batch 500, 25 epochs (EPOCHS), sigma_0 in SIGMAS (default "4"; Theorem 3.5 needs sigma_0 >= 4).
# Rows per sigma_0:
#   dp-ulr   DP-ULR in its sound gaussian mode (clipped proxy sum + N(0, sigma_0^2 C^2)) with the
#            clean-loss baseline (its default; eq. 4 alone does not learn), Adam 0.01, rejection
#            sampling accounted by SRGM (Theorem 3.5).
#   dp-sgd   DP-SGD at the paper's comparison point: the same sigma_0 as noise multiplier, SGD 0.1
#            (Opacus's default, as the paper), Poisson sampling.
#   dp-sgd-eq DP-SGD at the epsilon the DP-ULR row spent (noise multiplier from inverse accounting).
#   dp-sgd-standardized  DP-SGD at sigma_0 on standardized pixels (Opacus's MNIST example normalizes).
# With EQUIV_Z (default 9.37 = 4 / 0.4267: sigma_0 over the share r of DP-SGD's clipped signal that
# DP-ULR's clipped proxy sum carries, `python -m scripts.analysis.ulr_alignment`; empty: skipped),
# DP-SGD at noise multiplier EQUIV_Z with SGD 0.1 and with DP-ULR's Adam 0.01 (the gap's cause).
# Constant learning rate (the paper decays it by 0.85 every 10 epochs), no weight average, pixels.
# QUICK=1: one epoch on 5,000 training examples (a plumbing check, about a minute).
# OUT_DIR (default results/paper004-mnist); SEED (default 0).
# OPU_HAL_PYTHON=/path/to/python skips the venv set-up and runs `python -m trainers.cli`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/prologue.sh"  # HERE, ROOT, PY, opu-hal; cd "$ROOT"
OUT="${OUT_DIR:-results/paper004-mnist}"
mkdir -p "$OUT"
E="${EPOCHS:-25}"
LIMIT=()
if [ "${QUICK:-0}" = 1 ]; then E=1; LIMIT=(--train-limit 5000); fi
SEED="${SEED:-0}"
PAPER=(--dataset mnist --features pixels --hidden 128,64,32 --activation gelu --lr-schedule constant
  --weight-average 0 --batch-size 500 --epochs "$E" --seed "$SEED" --quiet "${LIMIT[@]}")
for s0 in ${SIGMAS:-4}; do
  ulr="$OUT/dp-ulr-s$s0-seed$SEED.json"
  opu-hal train --method dp-ulr "${PAPER[@]}" --optimizer adam --lr 0.01 --noise-multiplier "$s0" \
    --sampling rejection --opt mode=gaussian --opt baseline=on --out "$ulr"
  opu-hal train --method dp-sgd "${PAPER[@]}" --optimizer sgd --lr 0.1 --momentum 0 --noise-multiplier "$s0" \
    --sampling poisson --out "$OUT/dp-sgd-s$s0-seed$SEED.json"
  eps="$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['final']['epsilon'])" "$ulr")"
  opu-hal train --method dp-sgd "${PAPER[@]}" --optimizer sgd --lr 0.1 --momentum 0 --target-epsilon "$eps" \
    --sampling poisson --out "$OUT/dp-sgd-eq-s$s0-seed$SEED.json"
  opu-hal train --method dp-sgd "${PAPER[@]}" --inputs standardized --optimizer sgd --lr 0.1 --momentum 0 \
    --noise-multiplier "$s0" --sampling poisson --out "$OUT/dp-sgd-standardized-s$s0-seed$SEED.json"
done
for z in ${EQUIV_Z-9.37}; do
  opu-hal train --method dp-sgd "${PAPER[@]}" --optimizer sgd --lr 0.1 --momentum 0 --noise-multiplier "$z" \
    --sampling poisson --out "$OUT/dp-sgd-z$z-seed$SEED.json"
  opu-hal train --method dp-sgd "${PAPER[@]}" --optimizer adam --lr 0.01 --noise-multiplier "$z" \
    --sampling poisson --out "$OUT/dp-sgd-adam-z$z-seed$SEED.json"
done
opu-hal table "$OUT"/*.json
