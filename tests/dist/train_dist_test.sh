#!/usr/bin/env bash
# `lansbert train` under mpirun: the same global batch on 1, 2 and 4 ranks gives the same
# parameters (replicated GradSync, sharded ZeRO-1 with its buckets reduced to their owners
# during backward, fixed reduction order, sharded in fixed order or with overlap_reduction
# false: the reduce-scatter after backward; replicated without overlap; sharded with the
# layers recomputed in the backward, and replicated with the attention recomputed:
# batch.recompute; replicated with checkpoint.async; packed, data.packing), and a sharded 2-rank checkpoint
# resumes on 1 rank (replicated: the slices are joined) and on 4 ranks (sharded: re-sliced)
# and ends where the uninterrupted 2-rank run ends: same step, data position, micro-step
# count and parameters, as does a replicated 2-rank resume whose rank 1 sees only
# trainer.json (rank 0 reads and sends the rest). Parameters are compared with compare_params
# (relative 1e-6 for the whole model, 1e-5 per tensor; measured about 3e-8 and 3e-7 under
# each OpenBLAS kernel; the attention key biases, whose true gradient is zero, are reported,
# not compared: see compare_params.cc). The held-out evaluation at the end (90
# samples: micro-batches split unevenly over the ranks) reports the same sequences and the
# same losses on every rank count. Runs with a bf16 gradient wire stay close to the fp32 one.
# Usage: train_dist_test.sh LANSBERT MAKE_TRAIN_TEST_DATA COMPARE_PARAMS SCRATCH MPIEXEC FLAGS...
set -uo pipefail
lb=$1; mk=$2; cmp=$3; tmp=$4; mpiexec=$5; shift 5; flags=("$@")
rm -rf "$tmp"; mkdir -p "$tmp"
export OMP_NUM_THREADS=1
"$mk" "$tmp/data" >/dev/null || { echo "FAIL: make data"; exit 1; }
fail=0
# 32 sequences per step in micro-batches of 8: 4 micro-steps on 1 rank, 2 on 2, 1 on 4.
# Dropout stays on (its keys follow the micro-batch's index in the global batch).
cat > "$tmp/tiny.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], eval: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
evaluation: {max_sequences: 90}
batch: {global_batch: 32, micro_batch: 8}
optimizer: {lr: 0.02}
schedule: {total_steps: 6, warmup_ratio: 0.2}
checkpoint: {dir: $tmp/unused, every_steps: 0}
logging: {every_steps: 3, metrics_file: "-"}
distributed: {bucket_mb: 0.05}
YAML
source "$(dirname "$0")/train_runs.sh"
position() { sed -n '/"step"/p;/"micro_step"/p;/"data"/,/}/p' "$tmp/$1/latest/trainer.json" | tr -d ' \n'; }

train 1 r1
train 2 r2
train 4 r4
train 4 r4fixed --set distributed.reduction_order=fixed
train 2 s2 --set distributed.shard_optimizer=true
train 2 w2 --set distributed.grad_reduce_dtype=bf16
train 2 ws2 --set distributed.grad_reduce_dtype=bf16 --set distributed.shard_optimizer=true
train 4 s4 --set distributed.shard_optimizer=true
train 2 s2fixed --set distributed.shard_optimizer=true --set distributed.reduction_order=fixed
train 2 r2after --set distributed.overlap_reduction=false
train 2 s2after --set distributed.shard_optimizer=true --set distributed.overlap_reduction=false
train 2 s2recompute --set distributed.shard_optimizer=true --set batch.recompute=layers
train 2 r2attention --set batch.recompute=attention
train 2 r2async --set checkpoint.async=true --set checkpoint.every_steps=2 --set checkpoint.keep_last=5
for run in r2 r4 r4fixed s2 s4 s2fixed r2after s2after s2recompute r2attention r2async; do same r1 $run; done
# data.packing: each micro-batch is packed on its own rank, so 1 and 2 ranks pack the same
# micro-batches alike (dropout on: it differs from the unpacked runs, not between these).
train 1 p1 --set data.packing=true
train 2 p2s --set data.packing=true --set distributed.shard_optimizer=true
same p1 p2s
# Rank 0 wrote steps 2 and 4 in the background, as a synchronous writer would have.
[[ $(ls "$tmp/r2async" | grep -c '^step-') == 3 ]] || { echo "FAIL: r2async: $(ls "$tmp/r2async")"; fail=1; }
# "eval after step 6/6 | loss L | mlm_loss M | ... | 90 sequences in ...": L and M within 1e-4.
evalline() { grep "eval after step 6/6" "$tmp/$1.log"; }
for run in r1 r2 r4 s4; do
  evalline $run | grep -q "| 90 sequences" || { echo "FAIL: $run: no evaluation of 90 sequences"; fail=1; }
done
eval_close() {  # REF RUN TOL: loss and mlm_loss of RUN's final evaluation within TOL of REF's
  awk -v a="$(evalline $1)" -v b="$(evalline $2)" -v tol="$3" 'BEGIN {
    split(a, x, "|"); split(b, y, "|");
    for (i = 2; i <= 3; ++i) { split(x[i], p, " "); split(y[i], q, " "); d = p[2] - q[2]; if (d < 0) d = -d;
      if (d > tol || p[2] == "") exit 1 } }' || { echo "FAIL: eval on $2: $(evalline $2) vs $1: $(evalline $1)"; fail=1; }
}
for run in r2 r4 s4; do eval_close r1 $run 1e-4; done
grep -q "optimizer.state.rank-00003" "$tmp/s4/latest/trainer.json" || { echo "FAIL: s4 has no slice of rank 3"; fail=1; }
# Gradients on a 16-bit wire: the logs say so, the parameters are not those of the fp32 wire
# (so the wire was used), and the held-out losses stay within 1e-3 of the fp32 run's.
for run in w2 ws2; do
  grep -q "gradients reduced in bf16" "$tmp/$run.log" || { echo "FAIL: $run does not report the bf16 wire"; fail=1; }
  differs r2 $run 1e-6 "the fp32 wire"
  eval_close r2 $run 1e-3
done

# A sharded 2-rank run stopped at step 3, resumed on 1 rank (replicated) and on 4 (sharded).
train 2 part --set distributed.shard_optimizer=true --stop-at-step 3
cp -a "$tmp/part" "$tmp/part1"; cp -a "$tmp/part" "$tmp/part4"
train 0 part1 --resume latest
train 4 part4 --set distributed.shard_optimizer=true --resume latest
for run in part1 part4; do
  grep -q "resuming from .*step-000000003" "$tmp/$run.log" || { echo "FAIL: $run did not resume at step 3"; fail=1; }
  [[ $(position $run) == "$(position s2)" ]] || { echo "FAIL: $run ends at $(position $run), s2 at $(position s2)"; fail=1; }
  same s2 $run
done
# A replicated resume reads the weights and moments on rank 0 alone and sends them: rank 1,
# started in another directory, finds only trainer.json under the same relative checkpoint.dir,
# and the run still ends where the uninterrupted one does.
train 2 rpart --stop-at-step 3
mkdir -p "$tmp/far/rpart/step-000000003"
cp "$tmp/rpart/step-000000003/trainer.json" "$tmp/far/rpart/step-000000003/"
ln -s step-000000003 "$tmp/far/rpart/latest"
resume=(train --config "$tmp/tiny.yaml" --set checkpoint.dir=rpart --resume latest)
if timeout 300 "$mpiexec" "${flags[@]}" "${mpi_env[@]}" -np 1 -wdir "$tmp" "$lb" "${resume[@]}" : \
     -np 1 -wdir "$tmp/far" "$lb" "${resume[@]}" > "$tmp/rpart.log" 2>&1; then
  [[ $(position rpart) == "$(position r2)" ]] || { echo "FAIL: rpart ends at $(position rpart), r2 at $(position r2)"; fail=1; }
  same r2 rpart
else
  echo "FAIL: the resume with trainer.json alone on rank 1:"; tail -5 "$tmp/rpart.log"; fail=1
fi
[[ $(ls "$tmp/far/rpart/step-000000003") == trainer.json ]] || { echo "FAIL: rank 1 wrote into its checkpoint.dir"; fail=1; }
# logging.noise_scale on 2 ranks (the first micro-batch's |G_b|² averaged over the ranks, the
# update's |G_B|² from the reduced gradients), replicated and sharded: where every sample is the
# same there is no noise, and B_noise is 0 to rounding (a wrong rank average or a norm of the
# summed instead of the averaged gradients would not give 0); real data gives a positive one.
"$mk" "$tmp/same" 32 5 40 same > /dev/null || { echo "FAIL: make the same-sample data"; fail=1; }
noise=(--set logging.noise_scale=true --set model.hidden_dropout=0 --set model.attention_dropout=0)
train 2 n2 "${noise[@]}" --set "data.train=[$tmp/same/shards/*.lbs]"
train 2 n2s "${noise[@]}" --set "data.train=[$tmp/same/shards/*.lbs]" --set distributed.shard_optimizer=true
train 2 n2real "${noise[@]}"
for run in n2 n2s; do
  b=$(sed -n 's/.* B_noise \([^ ]*\) .*/\1/p' "$tmp/$run.log" | tail -1)
  awk -v b="$b" 'BEGIN { exit !(b != "" && b < 1e-4 && b > -1e-4) }' || { echo "FAIL: $run: B_noise '$b' on noiseless data"; fail=1; }
done
b=$(sed -n 's/.* B_noise \([^ ]*\) .*/\1/p' "$tmp/n2real.log" | tail -1)
awk -v b="$b" 'BEGIN { exit !(b > 0.1) }' || { echo "FAIL: n2real: B_noise '$b'"; fail=1; }
# --resume auto decides on each rank from what it sees: a rank whose (node-local) checkpoint.dir
# holds no checkpoint where rank 0's does would start a new run beside a resumed one, and is
# refused before the first step, naming what it decided.
mkdir -p "$tmp/far2"
auto=(train --config "$tmp/tiny.yaml" --set checkpoint.dir=rpart --resume auto)
timeout 120 "$mpiexec" "${flags[@]}" "${mpi_env[@]}" -np 1 -wdir "$tmp" "$lb" "${auto[@]}" : \
  -np 1 -wdir "$tmp/far2" "$lb" "${auto[@]}" > "$tmp/auto.log" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "command_line.resume is \"\" here, \"latest\" on rank 0" "$tmp/auto.log" ||
  { echo "FAIL: --resume auto decided differently on two ranks -> rc $rc:"; grep -v '^$' "$tmp/auto.log" | head -5; fail=1; }
[[ -z $(ls "$tmp/far2") ]] || { echo "FAIL: rank 1 of the refused --resume auto wrote: $(ls "$tmp/far2")"; fail=1; }
# --init-from that rank 0 sees as a lansbert checkpoint and rank 1 as a Hugging Face directory
# (the weights alone): refused with exit 2 before the ranks' collectives could differ.
mkdir -p "$tmp/far/r2"
cp "$tmp/r2/latest/model.safetensors" "$tmp/far/r2/"
init=(train --config "$tmp/tiny.yaml" --set checkpoint.dir=p2 --init-from r2)
timeout 120 "$mpiexec" "${flags[@]}" "${mpi_env[@]}" -np 1 -wdir "$tmp" "$lb" "${init[@]}" : \
  -np 1 -wdir "$tmp/far" "$lb" "${init[@]}" > "$tmp/init.log" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "init_from_is_a_lansbert_checkpoint is false here, true on rank 0" "$tmp/init.log" ||
  { echo "FAIL: --init-from seen differently -> rc $rc:"; tail -3 "$tmp/init.log"; fail=1; }
# lansbert verify checks every file of each: part4 holds the 2-rank step 3 and its 4-rank end.
"$lb" verify --checkpoint "$tmp/part4" --all > "$tmp/verify.log" 2>&1 &&
  grep -q "^ok .*step-000000003: step 3 of a 2-rank run, 4 files of .* (optimizer state in 2 slices)" "$tmp/verify.log" &&
  grep -q "^ok .*step-000000006: step 6 of a 4-rank run, 6 files of .* (optimizer state in 4 slices)" "$tmp/verify.log" ||
  { echo "FAIL: verify: $(cat "$tmp/verify.log")"; fail=1; }
(( fail )) && exit 1
echo "train dist: ok"
