#!/usr/bin/env bash
# `logging.tensorboard_dir` read by TensorBoard itself: a run stopped at step 4, its step-4
# checkpoint then lost (as to a crash just before it was written), resumed from step 2 to
# step 6. TensorBoard (check_tensorboard.py, with the first Python that imports tensorboard;
# exit 77 = skipped without one) must show each step's values once, those of the metrics
# file's last record for that step: the resumed run's file drops the first run's steps 3 and 4.
# Usage: tensorboard_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH
set -uo pipefail
lb=$1; mk=$2; tmp=$3
py=""
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import tensorboard.backend.event_processing.event_accumulator' 2>/dev/null; then py=$p; break; fi
done
[[ -n $py ]] || { echo "SKIP: no Python here imports tensorboard"; exit 77; }
rm -rf "$tmp"; mkdir -p "$tmp"
export OMP_NUM_THREADS=1
"$mk" "$tmp/data" >/dev/null || { echo "FAIL: make data"; exit 1; }
cat > "$tmp/c.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], eval: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 16}
schedule: {total_steps: 6}
checkpoint: {dir: $tmp/ckpt, every_steps: 2}
logging: {every_steps: 1, tensorboard_dir: $tmp/tb}
evaluation: {every_steps: 2, max_sequences: 32}
YAML
fail=0
"$lb" train --config "$tmp/c.yaml" --stop-at-step 4 > "$tmp/run1.log" 2>&1 || { echo "FAIL: run 1"; cat "$tmp/run1.log"; exit 1; }
rm -rf "$tmp/ckpt/step-000000004"
ln -sfn step-000000002 "$tmp/ckpt/latest"
sleep 1  # event files are named by the second they start in, and read in name order
"$lb" train --config "$tmp/c.yaml" --resume latest > "$tmp/run2.log" 2>&1 || { echo "FAIL: run 2"; cat "$tmp/run2.log"; exit 1; }
[[ $(ls "$tmp/tb" | grep -c '^events\.out\.tfevents\.') == 2 ]] || { echo "FAIL: not two event files: $(ls "$tmp/tb")"; fail=1; }
"$py" "$(dirname "$0")/check_tensorboard.py" "$tmp/tb" "$tmp/ckpt/metrics.jsonl" || fail=1
(( fail )) && exit 1
echo "tensorboard: ok"
