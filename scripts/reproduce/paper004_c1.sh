#!/usr/bin/env bash
# Paper 004 (DP-ULR), Table C1 on MNIST: model size against batch size at sigma_0 = 8, DP-ULR and
# DP-SGD, 25 epochs (EPOCHS), C = 1, delta 1e-5, GELU, the learning rate times 0.85 every 10 epochs
# (section 4.2; --lr-schedule decay-0.85-per-10). The paper's sizes are "about 2.5 and 5 times" the
# small MLP's parameters; ours: small 128-64-32 (111 146), medium 288-144-72 (278 866, 2.51x), large
# 512-256-128 (567 434, 5.11x). Rows per (size, batch in BATCHES, default "64 128 256"):
#   dp-ulr  the sound gaussian mode with the clean-loss baseline, Adam 0.01, rejection sampling (SRGM,
#           Theorem 3.5), as scripts/reproduce/paper004_mnist.sh;
#   dp-sgd  noise multiplier sigma_0, SGD 0.1 (Opacus's default, as the paper), Poisson sampling.
# SIZES picks sizes (default "small medium large"). PARALLEL=N runs N trainings at once (one thread
# each). QUICK=1: one epoch on 2,000 examples, small only (a plumbing check). OUT_DIR (default
# results/paper004-c1); SEED (default 0). OPU_HAL_PYTHON=/path/to/python skips the venv set-up.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/prologue.sh"  # HERE, ROOT, PY, opu-hal; cd "$ROOT"
OUT="${OUT_DIR:-results/paper004-c1}"
mkdir -p "$OUT"
E="${EPOCHS:-25}"
SIZES="${SIZES:-small medium large}"
LIMIT=()
if [ "${QUICK:-0}" = 1 ]; then E=1; SIZES=small; LIMIT=(--train-limit 2000); fi
SEED="${SEED:-0}"
declare -A HIDDEN=([small]=128,64,32 [medium]=288,144,72 [large]=512,256,128)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
jobs_at_most() { while [ "$(jobs -rp | wc -l)" -ge "${PARALLEL:-1}" ]; do wait -n; done; }
for size in $SIZES; do
  for b in ${BATCHES:-64 128 256}; do
    COMMON=(--dataset mnist --features pixels --hidden "${HIDDEN[$size]}" --activation gelu --batch-size "$b"
      --lr-schedule decay-0.85-per-10 --weight-average 0 --noise-multiplier 8 --epochs "$E" --seed "$SEED"
      --quiet "${LIMIT[@]}")
    jobs_at_most
    opu-hal train --method dp-ulr "${COMMON[@]}" --optimizer adam --lr 0.01 --sampling rejection \
      --opt mode=gaussian --opt baseline=on --out "$OUT/dp-ulr-$size-b$b-seed$SEED.json" &
    jobs_at_most
    opu-hal train --method dp-sgd "${COMMON[@]}" --optimizer sgd --lr 0.1 --momentum 0 --sampling poisson \
      --out "$OUT/dp-sgd-$size-b$b-seed$SEED.json" &
  done
done
wait
opu-hal table "$OUT"/*.json
