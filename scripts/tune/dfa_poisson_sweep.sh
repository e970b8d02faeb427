#!/usr/bin/env bash
# DP-DFA with Poisson sampling under add/remove adjacency (issue 35; --sampling poisson), software
# noise, on ScatterNet features: 3969-256-10 tanh, tau_h 5, tau_e 0.05, batch 2048 (expected), Adam,
# delta 1e-5, at epsilon 8 and 3. Candidates (the same for both epsilons): 15 epochs lr 1.5e-3; 30
# epochs lr 3e-3; 30 epochs lr 3e-3 with a cosine schedule and a weight average (decay 0.9); 20
# epochs lr 1.5e-3 with the same schedule and average (added after the first three). The
# pick is made on the validation split (which no run trains on) by trainers.cli.best_by_validation,
# then run again (REPEAT=1 bash scripts/tune/dfa_poisson_sweep.sh runs only the repeats of the
# picks, named *-repeat.json). Records in results/tuning/dp-dfa-poisson/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/dp-dfa-poisson
COMMON=(--method dp-dfa --sampling poisson --noise-source software --features scatter --hidden 256
        --activation tanh --tau-h 5 --tau-e 0.05 --batch-size 2048 --optimizer adam --delta 1e-5 --quiet)
CANDIDATES=("e15-lr1.5e-3|--epochs 15 --lr 1.5e-3"
            "e30-lr3e-3|--epochs 30 --lr 3e-3"
            "e30-lr3e-3-cosine-avg|--epochs 30 --lr 3e-3 --lr-schedule cosine --weight-average 0.9"
            "e20-lr1.5e-3-cosine-avg|--epochs 20 --lr 1.5e-3 --lr-schedule cosine --weight-average 0.9")
# ONLY=NAME runs that candidate alone (at both epsilons), e.g. one added after the first three.
if [[ "${REPEAT:-0}" == 1 ]]; then
  for eps in 8 3; do
    pick=$(python -m trainers.cli.best_by_validation --name "$OUT"/eps$eps-*[^t].json)
    for candidate in "${CANDIDATES[@]}"; do
      [[ "${candidate%%|*}" == "${pick#eps$eps-}" ]] && run_candidate "eps$eps-${candidate%%|*}-repeat" --target-epsilon "$eps" ${candidate#*|} &
    done
  done
  wait
else
  for candidate in "${CANDIDATES[@]}"; do
    [[ -n "${ONLY:-}" && "${candidate%%|*}" != "$ONLY" ]] && continue
    for eps in 8 3; do
      run_candidate "eps$eps-${candidate%%|*}" --target-epsilon "$eps" ${candidate#*|} &
    done
    wait
  done
fi
python -m trainers.cli.best_by_validation "$OUT"/*[^t].json  # the candidates; the repeats are *-repeat.json
