#!/usr/bin/env bash
# Trains a few steps of a tiny model, exports it, dumps a batch with lansbert's loss and
# runs check_hf_export.py with Debian's python3 (exit 77 = skipped: no torch/transformers).
set -euo pipefail
lb=$1; mk=$2; tmp=$3
py=/usr/bin/python3; [[ -x $py ]] || py=python3
if ! "$py" -c 'import torch, transformers' 2>/dev/null; then
  echo "SKIP: torch/transformers cannot be imported by $py"; exit 77
fi
rm -rf "$tmp"; mkdir -p "$tmp"
export OMP_NUM_THREADS=1
"$mk" "$tmp/data" >/dev/null
cat > "$tmp/c.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 16}
schedule: {total_steps: 5}
checkpoint: {dir: $tmp/ckpt}
YAML
"$lb" train --config "$tmp/c.yaml" >/dev/null
"$lb" eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs" --micro-batch 8 --max-sequences 8 \
  --dump-batch "$tmp/batch.json" >/dev/null
"$lb" export --checkpoint "$tmp/ckpt" --out "$tmp/hf" >/dev/null
"$py" "$(dirname "$0")/check_hf_export.py" "$tmp/hf" "$tmp/batch.json"
