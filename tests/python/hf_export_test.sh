#!/usr/bin/env bash
# Trains a few steps of a tiny model, exports it, dumps a batch with lansbert's loss and
# runs check_hf_export.py with Debian's python3 (exit 77 = skipped: no torch/transformers);
# then the bf16 and fp16 exports against the fp32 one (check_hf_dtype.py); then `lansbert eval`
# of a BertForPreTraining that transformers made and saved (make_hf_model.py) against
# transformers' loss on the same batch.
source "$(dirname "$0")/torch_test_setup.sh" "$@"
"$mk" "$tmp/data" >/dev/null
# init_std 0.2 (not 0.02): pre-activations large enough for the two GELU forms to give losses
# 1.6e-5 apart, far above the export's agreement (~1e-7), so the form's name is checked too.
cat > "$tmp/c.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64, init_std: 0.2}
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 16}
schedule: {total_steps: 5}
checkpoint: {dir: $tmp/ckpt}
YAML
# Both GELU forms: model.hidden_act gelu_tanh exports as Hugging Face's "gelu_new", which
# transformers must then compute to give lansbert's loss.
for act in gelu gelu_tanh; do
  "$lb" train --config "$tmp/c.yaml" --set model.hidden_act=$act --set "checkpoint.dir=$tmp/ckpt-$act" >/dev/null
  "$lb" eval --checkpoint "$tmp/ckpt-$act" --data "$tmp/data/shards/*.lbs" --micro-batch 8 --max-sequences 8 \
    --dump-batch "$tmp/batch-$act.json" >/dev/null
  "$lb" export --checkpoint "$tmp/ckpt-$act" --out "$tmp/hf-$act" >/dev/null
  echo "model.hidden_act: $act"
  check "$(dirname "$0")/check_hf_export.py" "$tmp/hf-$act" "$tmp/batch-$act.json"
done
# --dtype bf16 and fp16: every weight the fp32 export's, rounded as torch rounds it.
for dtype in bf16 fp16; do
  "$lb" export --checkpoint "$tmp/ckpt-gelu" --out "$tmp/hf-$dtype" --dtype $dtype >/dev/null
  check "$(dirname "$0")/check_hf_dtype.py" "$tmp/hf-gelu" "$tmp/hf-$dtype" $dtype
done
# A Hugging Face directory lansbert did not write: its sizes, GELU form and weights as
# transformers saved them, evaluated by lansbert on the batch transformers then scores.
check "$(dirname "$0")/make_hf_model.py" "$tmp/hf-made"
"$lb" eval --checkpoint "$tmp/hf-made" --data "$tmp/data/shards/*.lbs" --micro-batch 8 --max-sequences 8 \
  --dump-batch "$tmp/batch-made.json" >/dev/null
echo "a model transformers made:"
check "$(dirname "$0")/check_hf_export.py" "$tmp/hf-made" "$tmp/batch-made.json"
