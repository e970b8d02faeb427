# Sourced by the ScatterNet sweeps, with the default records folder as $1: installs opu-hal
# (scripts/setup.sh), enters the repository, makes $OUT ($SWEEP_OUT, else $1), and computes the
# ScatterNet features once, before the parallel runs share the cache.
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
cd "$ROOT"
OUT="${SWEEP_OUT:-$1}"
mkdir -p "$OUT"
opu-hal train --method dp-sgd --features scatter --hidden "" --noise-multiplier 1 --epochs 1 --train-limit 2048 --quiet >/dev/null
