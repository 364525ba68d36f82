#!/usr/bin/env bash
# Side-by-side CPU throughput of lansbert and PyTorch (Debian's python3-torch) on the same
# BERT configurations and batches, interleaved run by run so both sides see the same machine
# load. Prints a Markdown table for docs/performance.md.
#   scripts/bench-compare-pytorch.sh [build/lansbert] [models...]
# Environment: BATCH (8), SEQ (128), STEPS (3), THREADS ("1 2"), ROUNDS (2: best of).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/lansbert}
shift || true
models=${*:-bert-mini bert-small bert-base}
batch=${BATCH:-8} seq=${SEQ:-128} steps=${STEPS:-3} rounds=${ROUNDS:-2}
field() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['$1'])"; }
best() { printf '%s\n' "$@" | sort -g | tail -1; }
echo "| model | threads | lansbert tokens/s | PyTorch tokens/s | ratio | lansbert fwd/bwd ms | PyTorch fwd/bwd ms |"
echo "|---|---|---|---|---|---|---|"
for model in $models; do
  for t in ${THREADS:-1 2}; do
    lb=() pt=() lbj="" ptj=""
    for ((r = 0; r < rounds; r++)); do
      j=$(OMP_NUM_THREADS=$t "$bin" bench --model "$model" --seq-len "$seq" --batch "$batch" --steps "$steps" --threads "$t" --json)
      lb+=("$(echo "$j" | field tokens_per_s)"); lbj=$j
      j=$(OMP_NUM_THREADS=$t /usr/bin/python3 scripts/bench-pytorch.py --model "$model" --seq-len "$seq" --batch "$batch" --steps "$steps" --threads "$t")
      pt+=("$(echo "$j" | field tokens_per_s)"); ptj=$j
    done
    l=$(best "${lb[@]}") p=$(best "${pt[@]}")
    ratio=$(/usr/bin/python3 -c "print(f'{$l/$p:.2f}')")
    lfb="$(echo "$lbj" | field forward_ms) / $(echo "$lbj" | field backward_ms)"
    pfb="$(echo "$ptj" | field forward_ms) / $(echo "$ptj" | field backward_ms)"
    echo "| $model | $t | $l | $p | $ratio | $lfb | $pfb |"
  done
done
