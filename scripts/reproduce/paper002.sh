#!/usr/bin/env bash
# Paper 002, section 5.2 (fully connected, FashionMNIST): DP-DFA vs DP-SGD at epsilon in
# {1, 2, 4, 8}, delta 1e-5; hidden 128 and 256, sigmoid, batch 128, Adam 1e-3; noise chosen by
# inverse accounting for the planned epochs. Both use fixed-size minibatches without
# replacement (replace-one adjacency), so the epsilons compare like for like.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
cd "$ROOT"
OUT=results/paper002
mkdir -p "$OUT"
for eps in 1 2 4 8; do
  opu-hal train --method dp-dfa --target-epsilon "$eps" --epochs "${EPOCHS:-15}" --quiet --out "$OUT/dp-dfa-eps$eps.json"
  opu-hal train --method dp-sgd --sampling fixed --target-epsilon "$eps" --epochs "${EPOCHS:-15}" --quiet \
    --out "$OUT/dp-sgd-eps$eps.json"
done
opu-hal table "$OUT"/*.json
