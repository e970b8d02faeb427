# Sourced by the reproduction scripts: HERE (this folder), ROOT, PY (the project's Python) and an
# `opu-hal` command, then cd "$ROOT". OPU_HAL_PYTHON=/path/to/python skips the venv set-up (a GPU
# machine) and runs `python -m trainers.cli`.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -n "${OPU_HAL_PYTHON:-}" ]; then
  ROOT="$(cd "$HERE/../.." && pwd)"; PY="$OPU_HAL_PYTHON"; opu-hal() { "$PY" -m trainers.cli "$@"; }
else
  source "$HERE/../setup.sh"; PY="$VENV/bin/python"
fi
cd "$ROOT"
# out_dir DEFAULT: OUT is $OUT_DIR, else DEFAULT; the folder is made.
out_dir() { OUT="${OUT_DIR:-$1}"; mkdir -p "$OUT"; }
