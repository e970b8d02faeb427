#!/usr/bin/env bash
# DP-DFA rows at epsilon 1, 2, 3 and 8 (delta 1e-5, Poisson sampling under add/remove adjacency,
# software noise) on FashionMNIST and MNIST: 3969-256-10 tanh on the ScatterNet features, tau_h 5,
# tau_e 0.05, batch 2048 (expected), Adam, the settings of scripts/tune/dfa_poisson_sweep.sh.
# For each (dataset, epsilon): two candidates trained on the training split (54 000 images); the
# pick made on the validation split by trainers.cli.best_by_validation; the pick run again, then
# trained on all 60 000 images (FINAL_RUNS, default 1 here). The search is NOT paid for.
# Records in results/records/dp-dfa/<dataset>/eps<e>/; the table: python -m scripts.records.table.
#   DATASETS="fashion-mnist mnist" EPSILONS="1 2 3 8" PARALLEL=2 bash scripts/records/dp_dfa_rows.sh
set -uo pipefail
FINAL_RUNS="${FINAL_RUNS:-1}"
source "$(dirname "${BASH_SOURCE[0]}")/records_setup.sh" dp-dfa
COMMON=(--method dp-dfa --sampling poisson --noise-source software --features scatter --hidden 256
        --activation tanh --tau-h 5 --tau-e 0.05 --batch-size 2048 --optimizer adam --delta 1e-5 --quiet)
candidates() {  # epsilon -> "name|options" lines
  case "$1" in
    8) echo "e30-lr3e-3-cosine-avg|--epochs 30 --lr 3e-3 --lr-schedule cosine --weight-average 0.9" ;;
    *) echo "e15-lr1.5e-3|--epochs 15 --lr 1.5e-3" ;;
  esac
  echo "e20-lr1.5e-3-cosine-avg|--epochs 20 --lr 1.5e-3 --lr-schedule cosine --weight-average 0.9"
}
sweep_rows
