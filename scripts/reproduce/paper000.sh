#!/usr/bin/env bash
# Paper 000, non-private column on FashionMNIST: BP, DFA (torch), TDFA (torch, t = 0.15) and
# PDFA (simulated OPU), 784-512-512-10 tanh, 15 epochs, batch 256, SGD lr 0.01 momentum 0.9.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
cd "$ROOT"
OUT=results/reproduce-000
mkdir -p "$OUT"
for method in bp dfa tdfa pdfa; do
  opu-hal train --method "$method" --epochs "${EPOCHS:-15}" --quiet --out "$OUT/$method.json"
done
opu-hal table "$OUT"/*.json
opu-hal plot "$OUT"/*.json --out "$OUT/test_accuracy.png" --title "FashionMNIST, 784-512-512-10 tanh"
opu-hal plot "$OUT"/*.json --metric alignment.layer2 --out "$OUT/alignment_layer2.png"
