#!/usr/bin/env bash
# `lansbert train`'s first two updates against PyTorch (check_torch_step.py): the loss and the
# gradients of transformers' BertForPreTraining on the run's batch, the LANS, LAMB (apex's and
# NVLAMB's trust ratios) and AdamW updates written from the spec. Every run starts from one
# BertForPreTraining that transformers made (--init-from), without dropout, on one global
# batch holding every sample of the one shard (so the loader's order cannot matter), and
# checkpoints after updates 1 and 2, whose exports are compared with the reference.
# Exit 77 (CTest skip) when Debian's python3 cannot import torch and transformers.
source "$(dirname "$0")/torch_test_setup.sh" "$@"
here=$(dirname "$0")
"$mk" "$tmp/data" 32 5 20 >/dev/null  # 20 documents: one shard of 95 sequences
shard=$tmp/data/shards/shard-00000.lbs
check "$here/check_torch_step.py" make-model "$tmp/hf0"
# The batch: every sequence of the shard, as one micro-batch, with lansbert's loss on it.
n=$("$lb" eval --checkpoint "$tmp/hf0" --data "$shard" --max-sequences -1 --json |
    "$py" -c 'import json, sys; print(json.load(sys.stdin)["sequences"])')
"$lb" eval --checkpoint "$tmp/hf0" --data "$shard" --micro-batch "$n" --max-sequences "$n" \
  --dump-batch "$tmp/batch.json" >/dev/null
# lr: warmup over 2 of 10 updates, NVIDIA's 1-based position (first_update mult1), so the two
# updates get 0.02 and 0.04 (the default mult0 gives the first update lr 0); the check takes
# them from the metrics. weight_decay 0.1 (not 0.01) so the decay term shows clearly beside
# LANS's normalised directions. b1, b2, eps, max_grad_norm, no_decay: the defaults.
cat > "$tmp/c.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 32, layers: 2, heads: 2, intermediate: 48, max_positions: 32,
        hidden_dropout: 0, attention_dropout: 0, hidden_act: gelu}
data: {train: ["$shard"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: $n, micro_batch: $n}
optimizer: {lr: 0.04, weight_decay: 0.1}
schedule: {kind: lans, total_steps: 10, warmup_steps: 2, constant_steps: 4, first_update: mult1}
checkpoint: {every_steps: 1, keep_last: 3}
logging: {every_steps: 1}
YAML
status=0
for run in lans lamb:false lamb:true adamw; do
  name=${run%%:*}; tre=${run#*:}; [[ $tre == "$run" ]] && tre=false
  ck=$tmp/ckpt-${run/:/-}
  "$lb" train --config "$tmp/c.yaml" --init-from "$tmp/hf0" --stop-at-step 2 --set "checkpoint.dir=$ck" \
    --set "optimizer.name=$name" --set "optimizer.trust_ratio_on_excluded=$tre" >"$ck.log" 2>&1 ||
    { cat "$ck.log"; exit 1; }
  for s in 1 2; do
    "$lb" export --checkpoint "$ck/step-00000000$s" --out "$ck-hf$s" >/dev/null
  done
  echo "== optimizer.name $name, trust_ratio_on_excluded $tre"
  extra=(); [[ $tre == true ]] && extra=(--trust-ratio-on-excluded)
  check "$here/check_torch_step.py" --hf0 "$tmp/hf0" --hf1 "$ck-hf1" --hf2 "$ck-hf2" --batch "$tmp/batch.json" \
    --metrics "$ck/metrics.jsonl" --optimizer "$name" --weight-decay 0.1 "${extra[@]}" || status=1
done
exit $status
