#!/usr/bin/env bash
# Issue 19, "DFA for convolutional layers": DP-DFA's hybrid BP/DFA network (paper 002, section 4)
# on Tramer and Boneh's ScatterNet CNN (--hidden 16,32 --conv-strides 2,1 --head-hidden 32, tanh),
# at (epsilon 3, delta 1e-5), software noise, tau_e 0.05: batch size, epochs, Adam's learning rate
# and tau_h. Two runs at a time on the 2-core machine; the pick is made on the validation split
# (python -m trainers.cli.best_by_validation), then the pick and DP-SGD's CNN pick
# (scripts/tune/scatter_cnn_sweep.sh) are run at epsilon 8; about 45 min. Records in $SWEEP_OUT (default
# results/tuning/scatter-hybrid-cnn/).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sweep_setup.sh" results/tuning/scatter-hybrid-cnn
CNN=(--model cnn --features scatter --hidden 16,32 --conv-strides 2,1 --head-hidden 32 --activation tanh
     --delta 1e-5 --compute "${COMPUTE:-cpu}" --no-alignment --quiet)
run() {  # name method epsilon batch epochs lr [options...]
  local name=$1 method=$2 eps=$3 batch=$4 epochs=$5 lr=$6
  shift 6
  OMP_NUM_THREADS=1 opu-hal train --method "$method" "${CNN[@]}" --target-epsilon "$eps" --batch-size "$batch" \
    --epochs "$epochs" --lr "$lr" --optimizer adam "$@" --out "$OUT/$name.json" 2>&1 \
    | grep -E "test accuracy|rror" | sed "s/^/$name: /"
}
DFA=(--tau-e 0.05)
run hybrid-eps3-b2048-e20-lr1.5e-3-tauh5 dp-dfa 3 2048 20 1.5e-3 "${DFA[@]}" --tau-h 5 &
run hybrid-eps3-b2048-e20-lr1.5e-3-tauh1 dp-dfa 3 2048 20 1.5e-3 "${DFA[@]}" --tau-h 1 & wait
run hybrid-eps3-b8192-e60-lr4e-3-tauh1 dp-dfa 3 8192 60 4e-3 "${DFA[@]}" --tau-h 1 &
run hybrid-eps3-b4096-e30-lr3e-3-tauh1 dp-dfa 3 4096 30 3e-3 "${DFA[@]}" --tau-h 1 & wait
# the wider variant, as in DP-SGD's sweep, and DP-SGD's pick once more (another noise draw)
run hybrid-eps3-c32-64-b8192-e60-lr4e-3-tauh1 dp-dfa 3 8192 60 4e-3 "${DFA[@]}" --tau-h 1 --hidden 32,64 &
run dpsgd-eps3-c32-64-b8192-e60-lr4e-3-repeat dp-sgd 3 8192 60 4e-3 --clip-norm 0.1 --hidden 32,64 & wait
python -m trainers.cli.best_by_validation "$OUT"/hybrid-eps3-*.json
# both picks (32, 64 channels) at epsilon 8
run hybrid-eps8-c32-64-b8192-e60-lr4e-3-tauh1 dp-dfa 8 8192 60 4e-3 "${DFA[@]}" --tau-h 1 --hidden 32,64 &
run dpsgd-eps8-c32-64-b8192-e60-lr4e-3 dp-sgd 8 8192 60 4e-3 --clip-norm 0.1 --hidden 32,64 & wait
# the hybrid's epsilon-8 run once more (another draw of the privacy noise)
run hybrid-eps8-c32-64-b8192-e60-lr4e-3-tauh1-repeat dp-dfa 8 8192 60 4e-3 "${DFA[@]}" --tau-h 1 --hidden 32,64
python -m trainers.cli.best_by_validation "$OUT"/*.json
