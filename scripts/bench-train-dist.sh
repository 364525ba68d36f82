#!/usr/bin/env bash
# Step time of `lansbert train` on 1..N ranks, weak scaling: every rank one micro-batch of
# MICRO x 128 tokens per step (global_batch = MICRO * ranks), bert-mini (full 30,522 vocab),
# LANS, tiny synthetic shards, replicated and sharded optimizer state, each with the gradient
# reduction overlapped with backward (distributed.overlap_reduction: true) and after it
# (false). Prints the mean step time of the last window (steps after the first LOG) and the
# trainer's time shares from metrics.jsonl.
# Usage: scripts/bench-train-dist.sh BUILD_DIR [MICRO] [STEPS] [RANKS...]
set -euo pipefail
build=${1:-build}; micro=${2:-8}; steps=${3:-8}; shift $(( $# < 3 ? $# : 3 )) || true
ranks=("$@"); (( ${#ranks[@]} )) || ranks=(1 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/tests/make_train_test_data" "$tmp/data" 128 20 >/dev/null
half=$(( steps / 2 ))
root=(); [[ $(id -u) == 0 ]] && root=(--allow-run-as-root)
for np in "${ranks[@]}"; do
  for shard in false true; do
  for overlap in true false; do
    (( np == 1 )) && [[ $overlap == false ]] && continue  # one rank reduces nothing
    cat > "$tmp/c.yaml" <<YAML
model: {preset: bert-mini, vocab_size: 30522}  # the full-size embedding over the tiny test vocab
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 128, max_pred: 20}
batch: {global_batch: $(( micro * np )), micro_batch: $micro}
schedule: {total_steps: $steps}
checkpoint: {dir: $tmp/ck-$np-$shard-$overlap, every_steps: 0}
logging: {every_steps: $half}
distributed: {shard_optimizer: $shard, overlap_reduction: $overlap}
YAML
    mpirun "${root[@]}" --oversubscribe --bind-to none -np "$np" -x OMP_NUM_THREADS=1 \
      "$build/lansbert" train --config "$tmp/c.yaml" > "$tmp/log-$np-$shard-$overlap" 2>&1
    tail -1 "$tmp/ck-$np-$shard-$overlap/metrics.jsonl" | python3 -c "
import json,sys
r=json.load(sys.stdin)
print('ranks %s shard_optimizer %-5s overlap %-5s step %7.1f ms  seq/s %6.2f  compute %4.1f%%  all-reduce %4.1f%%  optimizer %4.1f%%  data %4.1f%%' % (
  '$np', '$shard', '$overlap', 1000*$(( micro * np ))/r['seq_per_s'], r['seq_per_s'], 100*r['share']['compute'], 100*r['share']['allreduce'], 100*r['share']['optimizer'], 100*r['share']['data']))"
  done
  done
done
