# Sourced by the record sweeps with the method's folder name as $1: installs opu-hal
# (scripts/setup.sh), computes each dataset's ScatterNet features once (before parallel runs share
# the cache), and defines sweep_rows, which the sweep calls after setting COMMON (options shared by
# every run) and candidates (a function: epsilon -> "name|options" lines). For each dataset of
# $DATASETS and epsilon of $EPSILONS, sweep_rows trains the candidates ($PARALLEL at a time, one
# thread each), picks one on the validation split, runs it again, and trains it $FINAL_RUNS times (1
# or 2, default 2) on all 60 000 images. Records in $RECORDS_OUT (default results/records/$1)/<dataset>/eps<e>/<name>.json.
# OPU_HAL_PYTHON=/path/to/python skips the venv set-up (a GPU machine); FEATURES=0 skips the
# feature pass (when the cache already holds them), FEATURES=only runs it alone.
if [ -n "${OPU_HAL_PYTHON:-}" ]; then
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"; PY="$OPU_HAL_PYTHON"
  opu-hal() { "$PY" -m trainers.cli "$@"; }
else
  source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"; PY="$VENV/bin/python"
fi
cd "$ROOT"
METHOD_DIR="${RECORDS_OUT:-results/records/$1}"
DATASETS="${DATASETS:-fashion-mnist mnist}"
EPSILONS="${EPSILONS:-1 2 3 8}"
PARALLEL="${PARALLEL:-2}"
FINAL_RUNS="${FINAL_RUNS:-2}"  # runs of the pick on all 60 000 images (1 or 2)
for dataset in $DATASETS; do  # features once per dataset, outside the parallel runs
  [ "${FEATURES:-1}" = 0 ] && break
  opu-hal train --method dp-sgd --dataset "$dataset" --features scatter --hidden "" --noise-multiplier 1 \
    --epochs 1 --train-limit 2048 --quiet >/dev/null
done
[ "${FEATURES:-1}" = only ] && exit 0

run_record() {  # out name options...: one run into out/name.json, its test line prefixed with the name
  local out=$1 name=$2; shift 2
  [ -s "$out/$name.json" ] && { echo "$out/$name: kept (record exists)"; return; }
  # shellcheck disable=SC2086  # RECORD_EXTRA: options appended to every run (a plumbing check)
  OMP_NUM_THREADS=1 opu-hal train "${COMMON[@]}" "$@" ${RECORD_EXTRA:-} --out "$out/$name.json" 2>&1 |
    grep -E "test accuracy|rror" | sed "s|^|$out/$name: |"
}

sweep_rows() {
  local dataset epsilon out line
  for dataset in $DATASETS; do
    for epsilon in $EPSILONS; do
      out="$METHOD_DIR/$dataset/eps$epsilon"
      mkdir -p "$out"
      while read -r line; do
        while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
        run_record "$out" "${line%%|*}" --dataset "$dataset" --target-epsilon "$epsilon" ${line#*|} &
      done < <(candidates "$epsilon")
      wait
      local pick
      local tried=()  # the candidates' records (not the repeats or the 60k runs)
      while read -r line; do tried+=("$out/${line%%|*}.json"); done < <(candidates "$epsilon")
      pick=$("$PY" -m trainers.cli.best_by_validation --name "${tried[@]}") || continue
      while read -r line; do
        [[ "${line%%|*}" == "$pick" ]] || continue
        local options=(--dataset "$dataset" --target-epsilon "$epsilon" ${line#*|})
        run_record "$out" "$pick-repeat" "${options[@]}" &
        run_record "$out" "$pick-final-60k" "${options[@]}" --validation-fraction 0 &
        wait
        [ "$FINAL_RUNS" -ge 2 ] && run_record "$out" "$pick-final-60k-second" "${options[@]}" --validation-fraction 0
      done < <(candidates "$epsilon")
    done
  done
}
