#!/usr/bin/env bash
# Paper 000, Table 1, private columns: photonic DP-DFA (eq. 8-9) at sigma in {0.01 ... 0.2},
# tau_h_max = 1, tau_B = tau_f = 1, on the torch profile (software noise: the "DFA" row, and the
# "TDFA" row with --ternarize). 784-512-512-10 tanh, 15 epochs, batch 256, SGD 0.01/0.9.
# CLIP=all (default) applies eq. 9 to every layer's input, the pixels included; CLIP=hidden clips
# the hidden neurons only (--no-clip-pixels; the paper's text says "the neurons").
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
cd "$ROOT"
CLIP="${CLIP:-all}"
case "$CLIP" in
  all) OUT=results/table1; EXTRA=() ;;
  hidden) OUT=results/table1-hidden-only; EXTRA=(--no-clip-pixels) ;;
  *) echo "CLIP=$CLIP: choose all or hidden" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
EPOCHS="${EPOCHS:-15}"
for sigma in 0.01 0.03 0.05 0.1 0.2; do
  OMP_NUM_THREADS=1 opu-hal train --method photonic-dp --profile torch-cpu --sigma "$sigma" --inputs standardized \
    --epochs "$EPOCHS" --quiet --no-alignment "${EXTRA[@]}" --out "$OUT/dfa-sigma$sigma.json" &
  OMP_NUM_THREADS=1 opu-hal train --method photonic-dp --profile torch-cpu --sigma "$sigma" --ternarize --inputs standardized \
    --epochs "$EPOCHS" --quiet --no-alignment "${EXTRA[@]}" --out "$OUT/tdfa-sigma$sigma.json" &
  wait
done
opu-hal table "$OUT"/*.json
