#!/usr/bin/env bash
# Issue 16's GPU checks in one go, for a machine with CUDA and its own torch (the lent H100):
# installs opu-hal without dependencies over that torch (wheels of the missing pure dependencies
# from .whl/ when present), then runs the CUDA tests, the two GPU benchmarks and paper 000's
# Table 1 on the GPU. Logs go to $OUT (default results/gpu). FashionMNIST from $OPU_HAL_DATA_DIR
# (default .gpudata/fashion-mnist; the script stops when its IDX files are not there).
#   STAGES="tests suite bench pdfa device syncs profile paper002 papers table1" bash scripts/gpu_check.sh
#   STAGES=install bash scripts/gpu_check.sh   (only the install)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-results/gpu}"
mkdir -p "$OUT"
STAGES="${STAGES:-tests bench profile table1}"
export OPU_HAL_SYSTEM_PYTHON=1 PYTHONUNBUFFERED=1 OPU_HAL_CACHE="${OPU_HAL_CACHE:-/tmp/opu-hal-cache}"
# FashionMNIST's four IDX files, by default from .gpudata/fashion-mnist. Refused when missing: the
# benchmarks would time random data of the same shape and the papers' runs would learn nothing
# (2026-11-28: a folder one level too high cost a device run its accuracies).
export OPU_HAL_DATA_DIR="${OPU_HAL_DATA_DIR:-$ROOT/.gpudata/fashion-mnist}"
if ! ls "$OPU_HAL_DATA_DIR"/train-images-idx3-ubyte* >/dev/null 2>&1; then
  echo "gpu_check.sh: OPU_HAL_DATA_DIR=$OPU_HAL_DATA_DIR holds no train-images-idx3-ubyte[.gz] (FashionMNIST's IDX files)" >&2
  exit 2
fi
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null || exit 1
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'
stage() { echo "== $1 ($(date +%T))"; }
papers_stage() {  # MNIST from .gpudata/mnist; each job's log in one file; records packed into one archive
  local mnist="$ROOT/.gpudata/mnist" fmnist="$OPU_HAL_DATA_DIR" limit="${PAPERS_LIMIT_S:-480}" d e
  local -A dirs=([fashion-mnist]="$fmnist" [mnist]="$mnist")
  # One CPU thread a job: on 16 cores, 15 jobs of 16 threads each spent the first try's 470 s
  # oversubscribed (2026-11-27: 3 of 32 DP-DFA records in that time, each 4 s of training).
  export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  mkdir -p "$OUT/papers"
  for e in ${P003_EPSILONS-0.5 1 2}; do
    OPU_HAL_DATA_DIR="$mnist" OPU_HAL_PYTHON=python3 EPSILONS="$e" PARALLEL=1 OUT_DIR=results/paper003-mnist \
      timeout "$limit" bash scripts/reproduce/paper003_mnist.sh >"$OUT/papers/paper003-eps$e.log" 2>&1 &
  done
  [ -n "${P000_ROWS-pdfa nonprivate}" ] && OPU_HAL_DATA_DIR="$mnist" OPU_HAL_PYTHON=python3 ROWS="${P000_ROWS-pdfa nonprivate}" \
    COMPUTE=cuda timeout "$limit" bash scripts/reproduce/paper000_mnist.sh >"$OUT/papers/paper000.log" 2>&1 &
  for d in ${RECORD_DATASETS-fashion-mnist mnist}; do
    OPU_HAL_DATA_DIR="${dirs[$d]}" OPU_HAL_PYTHON=python3 DATASETS="$d" FEATURES=only \
      timeout 200 bash scripts/records/dp_dfa_rows.sh >"$OUT/papers/features-$d.log" 2>&1 || true  # the features, once
    for e in ${RECORD_EPSILONS-1 2 3 8}; do
      OPU_HAL_DATA_DIR="${dirs[$d]}" OPU_HAL_PYTHON=python3 DATASETS="$d" EPSILONS="$e" FEATURES=0 FINAL_RUNS=1 \
        timeout "$limit" bash scripts/records/dp_dfa_rows.sh >"$OUT/papers/dp-dfa-$d-eps$e.log" 2>&1 &
    done
  done
  wait
  # one archive: the device machine sends back only a few files
  tar czf "$OUT/papers.tgz" "$OUT/papers" results/paper003-mnist results/paper000-mnist results/records/dp-dfa 2>/dev/null
  rm -rf "$OUT/papers"
}
for s in $STAGES; do
  case "$s" in
    install)  # the install above, and nothing more (then run one command by hand)
      stage "installed" ;;
    tests)
      stage "CUDA tests"
      timeout 300 python3 -m pytest ${TESTS_K:+-k "$TESTS_K"} -q -p no:cacheprovider -rs tests/test_compute_device.py tests/test_counter_random.py \
        tests/test_poisson.py tests/test_simulated.py tests/test_torch_backend.py tests/test_triton_kernels.py \
        tests/test_cuda_private.py tests/test_speckle_anchor.py 2>&1 | tee "$OUT/tests-cuda.log" | tail -n 25 ;;
    suite)
      stage "whole suite on the GPU machine (8 workers)"
      timeout 420 python3 -m pytest -q -p no:cacheprovider -n 8 2>&1 | tee "$OUT/tests-all.log" | tail -n 30 ;;
    bench)
      stage "camera kernel"
      timeout 120 python3 -m benchmarks.camera_kernel 2>&1 | tee "$OUT/camera-kernel.log"
      stage "simulated projection"
      timeout 200 python3 -m benchmarks.simulated_projection --compute cuda --skip-memory 2>&1 | tee "$OUT/projection.log"
      stage "training epochs"
      timeout 420 python3 -m benchmarks.gpu_training --rounds 3 ${BENCH_ONLY:+--only "$BENCH_ONLY"} 2>&1 | tee "$OUT/training.log" ;;
    pdfa)
      stage "pdfa against dfa and the linear projection against a matmul (the one-kernel read against three reads)"
      timeout 200 python3 -m benchmarks.gpu_training --rounds 3 --only bp,dfa,pdfa 2>&1 | tee "$OUT/training-pdfa.log" ;;
    paper002)
      stage "paper 002's convolutional comparison, ${P002_EPOCHS:-50} epochs, every (method, lr) at once"
      OPU_HAL_PYTHON=python3 COMPUTE=cuda PARALLEL=1 EPOCHS="${P002_EPOCHS:-50}" LRS="${P002_LRS:-1e-3 3e-3 1e-2}" \
        OUT_DIR="$OUT/paper002-conv" timeout "${P002_LIMIT_S:-420}" bash scripts/reproduce/paper002_conv.sh 2>&1 |
        tee "$OUT/paper002-conv.log" | grep -E "^\||rror" ;;
    papers)
      stage "MNIST rows of papers 003 and 000 and the DP-DFA records, every run at once (${PAPERS_LIMIT_S:-480} s)"
      papers_stage ;;
    device)
      stage "device-noise dp-dfa against bp (8192 examples: its counts are drawn on the CPU)"
      timeout 240 python3 -m benchmarks.gpu_training --rounds 2 --train 8192 --only "bp,dp-dfa (device)" --skip-projection 2>&1 | tee "$OUT/training-device.log" ;;
    syncs)
      stage "host synchronizations per training step, by call site"
      timeout 150 python3 -m benchmarks.gpu_syncs --out "$OUT" 2>&1 | grep -v USDT | tee "$OUT/syncs.log" ;;
    profile)
      stage "profiles of training steps"
      timeout 200 python3 -m benchmarks.gpu_profile --out "$OUT" --projection --only "${PROFILE_RUNS-bp,dp-sgd,dp-dfa}" 2>&1 | grep -v USDT ;;
    table1)
      stage "paper 000 table 1 on the GPU"
      COMPUTE=cuda timeout 560 bash scripts/reproduce/table1.sh 2>&1 | tee "$OUT/table1.log" | tail -n 30
      tar czf "$OUT/table1-cuda.tgz" results/table1-cuda 2>/dev/null ;;
    *) echo "unknown stage $s" ;;
  esac
done
stage done
