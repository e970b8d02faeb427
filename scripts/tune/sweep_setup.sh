# Sourced by the ScatterNet sweeps, with the default records folder as $1: installs opu-hal
# (scripts/setup.sh), enters the repository, makes $OUT ($SWEEP_OUT, else $1), and computes the
# ScatterNet features once, before the parallel runs share the cache. run_candidate NAME [OPTIONS...]
# trains "${COMMON[@]}" (set by the sweep) plus OPTIONS into $OUT/NAME.json on one thread and prints
# the run's test-accuracy line (or its error) prefixed with NAME.
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
cd "$ROOT"
OUT="${SWEEP_OUT:-$1}"
mkdir -p "$OUT"
opu-hal train --method dp-sgd --features scatter --hidden "" --noise-multiplier 1 --epochs 1 --train-limit 2048 --quiet >/dev/null
run_candidate() { local name=$1; shift; OMP_NUM_THREADS=1 opu-hal train "${COMMON[@]}" "$@" --out "$OUT/$name.json" 2>&1 |
                  grep -E "test accuracy|rror" | sed "s/^/$name: /"; }
