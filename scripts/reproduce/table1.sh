#!/usr/bin/env bash
# Paper 000, Table 1, private columns: photonic DP-DFA (eq. 8-9) at sigma in {0.01 ... 0.2},
# tau_h_max = 1, tau_B = tau_f = 1, on the torch profile (software noise: the "DFA" row, and the
# "TDFA" row with --ternarize). 784-512-512-10 tanh, 15 epochs, batch 256, SGD 0.01/0.9.
# CLIP=all (default) applies eq. 9 to every layer's input, the pixels included; CLIP=hidden clips
# the hidden neurons only (--no-clip-pixels; the paper's text says "the neurons").
# COMPUTE=cpu (default): two runs at a time on one thread each (the 2-core machine).
# COMPUTE=cuda: the torch-auto profile and --compute cuda, all ten runs at once on the one GPU,
# together with the non-private column (bp, dfa, tdfa, pdfa as in paper000.sh, pdfa on the
# simulated OPU on the GPU); the total wall time is printed (issue 16's goal on an H100: <= 10 min).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
cd "$ROOT"
CLIP="${CLIP:-all}"
case "$CLIP" in
  all) OUT=results/table1; EXTRA=() ;;
  hidden) OUT=results/table1-hidden-only; EXTRA=(--no-clip-pixels) ;;
  *) echo "CLIP=$CLIP: choose all or hidden" >&2; exit 2 ;;
esac
COMPUTE="${COMPUTE:-cpu}"
case "$COMPUTE" in
  cpu) PROFILE=torch-cpu; AT_ONCE=2 ;;
  cuda) PROFILE=torch-auto; AT_ONCE=10; OUT="$OUT-cuda"; EXTRA+=(--compute cuda) ;;
  *) echo "COMPUTE=$COMPUTE: choose cpu or cuda" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
EPOCHS="${EPOCHS:-15}"
began=$SECONDS
running=0
if [ "$COMPUTE" = cuda ]; then
  for method in bp dfa tdfa pdfa; do
    OMP_NUM_THREADS=1 opu-hal train --method "$method" --compute cuda --inputs standardized --epochs "$EPOCHS" \
      --quiet --no-alignment --out "$OUT/nonprivate-$method.json" &
  done
fi
for sigma in 0.01 0.03 0.05 0.1 0.2; do
  for row in dfa tdfa; do
    ternarize=(); [ "$row" = tdfa ] && ternarize=(--ternarize)
    OMP_NUM_THREADS=1 opu-hal train --method photonic-dp --profile "$PROFILE" --sigma "$sigma" "${ternarize[@]}" \
      --inputs standardized --epochs "$EPOCHS" --quiet --no-alignment "${EXTRA[@]}" --out "$OUT/$row-sigma$sigma.json" &
    running=$((running + 1))
    if [ "$running" -ge "$AT_ONCE" ]; then wait; running=0; fi
  done
done
wait
echo "table 1 ($COMPUTE, $EPOCHS epochs, 10 runs): $((SECONDS - began)) s in total" >&2
opu-hal table "$OUT"/*.json
