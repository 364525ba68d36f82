#!/usr/bin/env bash
# The commands under mpirun. `lansbert eval`: the ranks share the micro-batches (7 sequences
# each here, so they split unevenly over 2 and 3 ranks), rank 0 alone prints, and the numbers
# are the ones one process prints; rank 0 alone reads the weights (of a checkpoint or of a
# Hugging Face directory); --dump-batch writes rank 0's first micro-batch, as one process does.
# A rank that sees other data, or none, another kind of directory or another model, or is given
# other eval options, ends the job with a
# message naming why and the exit code of its error, instead of a mix of two data sets or a job
# left waiting. The commands that are one process (prep, vocab, export, tokenize, verify, bench
# without --comm) refuse to be started as several copies, which would write one output
# together, unless LANSBERT_COMM=single says each copy is on its own.
# Usage: cli_under_mpirun_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH MPIEXEC FLAGS...
source "$(dirname "$0")/../cli/train_test_setup.sh" "$@"
mpiexec=$4; shift 4; flags=("$@")
cat > "$tmp/tiny.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 16}
schedule: {total_steps: 3}
checkpoint: {dir: $tmp/ckpt}
logging: {metrics_file: "-"}
YAML
"$lb" train --config "$tmp/tiny.yaml" > /dev/null || { echo "FAIL: training the checkpoint"; exit 1; }
base=(eval --checkpoint "$tmp/ckpt" --micro-batch 7)
ev=("${base[@]}" --data "$tmp/data/shards/*.lbs" --max-sequences 200)
"$lb" "${ev[@]}" --dump-batch "$tmp/one.json" > "$tmp/one.log" || { echo "FAIL: eval on one process"; exit 1; }
numbers() { grep -v -e '^checkpoint' -e '^Hugging Face model' "$1"; }
for np in 2 3; do
  timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -np $np "$lb" "${ev[@]}" --dump-batch "$tmp/np$np.json" \
    > "$tmp/np$np.log" 2>&1 || { echo "FAIL: eval on $np ranks: $(cat "$tmp/np$np.log")"; fail=1; continue; }
  grep -q "^checkpoint .*, $np ranks)" "$tmp/np$np.log" || { echo "FAIL: $np ranks: header: $(cat "$tmp/np$np.log")"; fail=1; }
  [[ $(grep -c '^mlm_loss' "$tmp/np$np.log") == 1 ]] || { echo "FAIL: $np ranks: not rank 0 alone printed"; fail=1; }
  [[ $(numbers "$tmp/np$np.log") == "$(numbers "$tmp/one.log")" ]] ||
    { echo "FAIL: $np ranks: $(numbers "$tmp/np$np.log") differs from one process: $(numbers "$tmp/one.log")"; fail=1; }
  cmp -s "$tmp/one.json" "$tmp/np$np.json" || { echo "FAIL: $np ranks: --dump-batch differs"; fail=1; }
done
grep -q "^sequences 200, " "$tmp/one.log" || { echo "FAIL: one process: $(cat "$tmp/one.log")"; fail=1; }

# expect_job RC MESSAGE -- MPMD ARGS: the job must end with RC and print MESSAGE.
expect_job() {
  local want=$1 msg=$2; shift 3
  timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 "$@" > "$tmp/job.log" 2>&1
  local rc=$?
  if (( rc != want )) || ! grep -qF -- "$msg" "$tmp/job.log"; then
    echo "FAIL: job exit $rc (want $want), output lacks '$msg':"; grep -v '^$' "$tmp/job.log" | head -8; fail=1
  fi
}
expect_job 2 "eval data not as on rank 0: sequences is 100 here, 200 on rank 0 (give every rank the same --data, --names" -- \
  -np 1 "$lb" "${ev[@]}" : -np 1 "$lb" "${base[@]}" --data "$tmp/data/shards/*.lbs" --max-sequences 100
# As many sequences of other content (the same text masked at another rate, as shards of
# another prep run under the same node-local path would be): the digests differ.
printf 'w%d w%d w%d w%d w%d w%d .\n' $(seq 5 3000 | awk '{print 5 + ($1 * 7919) % 59}') > "$tmp/text.txt"
for d in a:0.15 b:0.1; do
  "$lb" prep --vocab "$tmp/data/vocab.txt" --input "$tmp/text.txt" --out "$tmp/${d%%:*}" --seq-len 32 --max-pred 5 \
    --masked-lm-prob "${d#*:}" --no-progress > /dev/null || { echo "FAIL: prep ${d%%:*}"; fail=1; }
done
expect_job 2 "eval data not as on rank 0: sample_digest is " -- \
  -np 1 "$lb" "${base[@]}" --data "$tmp/a/*.lbs" : -np 1 "$lb" "${base[@]}" --data "$tmp/b/*.lbs"
grep -qE "sequences is|samples is" "$tmp/job.log" && { echo "FAIL: the two preps were meant to hold as many samples"; fail=1; }
# Named sets (--names): the ranks share the micro-batches of both sets, which are the ones one
# process evaluates; a rank given other names is refused (it would print the sets under them).
sets=("${base[@]}" --data "$tmp/a/*.lbs" --data "$tmp/b/*.lbs" --names a b --max-sequences 30)
"$lb" "${sets[@]}" > "$tmp/sets1.log" || { echo "FAIL: named sets on one process"; fail=1; }
grep -q "^b: mlm_loss " "$tmp/sets1.log" || { echo "FAIL: no line of set b: $(cat "$tmp/sets1.log")"; fail=1; }
for np in 2 3; do
  timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -np $np "$lb" "${sets[@]}" > "$tmp/sets$np.log" 2>&1 &&
    [[ $(numbers "$tmp/sets$np.log") == "$(numbers "$tmp/sets1.log")" ]] ||
    { echo "FAIL: named sets on $np ranks: $(cat "$tmp/sets$np.log") vs one process: $(cat "$tmp/sets1.log")"; fail=1; }
done
expect_job 2 'eval options not as on rank 0: names[0] is "x" here, "a" on rank 0' -- \
  -np 1 "$lb" "${sets[@]}" : -np 1 "$lb" "${base[@]}" --data "$tmp/a/*.lbs" --data "$tmp/b/*.lbs" --names x y --max-sequences 30
expect_job 3 "[rank 1 on" -- -np 1 "$lb" "${ev[@]}" : -np 1 "$lb" "${base[@]}" --data "$tmp/none/*.lbs"
grep -q "no shard files match $tmp/none/\*.lbs" "$tmp/job.log" || { echo "FAIL: the missing data is not named"; fail=1; }

# Rank 0 alone reads the weights and sends them: a rank whose checkpoint copy holds only
# trainer.json evaluates as the others; damaged weights on rank 0 end the job with exit 4,
# naming the file, on every rank.
mkdir -p "$tmp/thin" "$tmp/bad"
cp "$tmp/ckpt/latest/trainer.json" "$tmp/thin/"
cp "$tmp/ckpt/latest/"* "$tmp/bad/"
printf '\x7f' | dd of="$tmp/bad/model.safetensors" bs=1 seek=$(( $(stat -c %s "$tmp/bad/model.safetensors") - 1 )) conv=notrunc 2>/dev/null
evd=(--data "$tmp/data/shards/*.lbs" --max-sequences 200)
timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -np 1 "$lb" "${ev[@]}" : \
  -np 1 "$lb" eval --checkpoint "$tmp/thin" --micro-batch 7 "${evd[@]}" > "$tmp/thin.log" 2>&1 &&
  [[ $(numbers "$tmp/thin.log") == "$(numbers "$tmp/one.log")" ]] ||
  { echo "FAIL: eval with trainer.json alone on rank 1: $(cat "$tmp/thin.log")"; fail=1; }
expect_job 4 "$tmp/bad/model.safetensors: size or CRC32C differs" -- \
  -np 1 "$lb" eval --checkpoint "$tmp/bad" --micro-batch 7 "${evd[@]}" : -np 1 "$lb" "${ev[@]}"
# A Hugging Face directory likewise: rank 0 alone reads its weights (rank 1's copy of
# model.safetensors is empty) and the job prints one process's numbers, which are the
# checkpoint's; a rank that sees a checkpoint where rank 0 sees a Hugging Face directory is
# refused by name, not left in another collective.
"$lb" export --checkpoint "$tmp/ckpt" --out "$tmp/hfx" > /dev/null || { echo "FAIL: export"; fail=1; }
mkdir -p "$tmp/hfx-thin" && cp "$tmp/hfx/config.json" "$tmp/hfx-thin/" && : > "$tmp/hfx-thin/model.safetensors"
timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -np 1 "$lb" eval --checkpoint "$tmp/hfx" --micro-batch 7 \
  "${evd[@]}" : -np 1 "$lb" eval --checkpoint "$tmp/hfx-thin" --micro-batch 7 "${evd[@]}" > "$tmp/hfx.log" 2>&1 &&
  grep -q "^Hugging Face model $tmp/hfx (cpu backend, fp32 GEMMs, 2 ranks)" "$tmp/hfx.log" &&
  [[ $(numbers "$tmp/hfx.log") == "$(numbers "$tmp/one.log")" ]] ||
  { echo "FAIL: eval of a Hugging Face directory on 2 ranks: $(cat "$tmp/hfx.log")"; fail=1; }
expect_job 2 "checkpoint_is_hugging_face" -- \
  -np 1 "$lb" eval --checkpoint "$tmp/hfx" --micro-batch 7 "${evd[@]}" : -np 1 "$lb" "${ev[@]}"
# Ranks given other options, or seeing another model under one path, are refused by name
# before any weights are sent (another micro-batch split the samples otherwise; another model
# size corrupted the broadcast; a --dump-batch on one rank alone hung its path check).
expect_job 2 "micro_batch is 4 here, 7 on rank 0" -- \
  -np 1 "$lb" "${ev[@]}" : -np 1 "$lb" eval --checkpoint "$tmp/ckpt" --micro-batch 4 --data "$tmp/data/shards/*.lbs" \
  --max-sequences 200
expect_job 2 "dump_batch is true here, false on rank 0" -- \
  -np 1 "$lb" "${ev[@]}" : -np 1 "$lb" "${ev[@]}" --dump-batch "$tmp/rank1.json"
"$lb" train --config "$tmp/tiny.yaml" --set model.intermediate=96 --set "checkpoint.dir=$tmp/ckpt96" > /dev/null ||
  { echo "FAIL: training the second checkpoint"; fail=1; }
expect_job 2 "model.intermediate_size is 96 here, 128 on rank 0" -- \
  -np 1 "$lb" "${ev[@]}" : -np 1 "$lb" eval --checkpoint "$tmp/ckpt96" --micro-batch 7 --data "$tmp/data/shards/*.lbs" \
  --max-sequences 200

# One-process commands started twice: refused before anything is written.
expect_job 2 "lansbert export runs as one process, but the launcher started 2 (OMPI_COMM_WORLD_SIZE=2)" -- \
  -np 2 "$lb" export --checkpoint "$tmp/ckpt" --out "$tmp/hf"
[[ -e $tmp/hf ]] && { echo "FAIL: a refused export wrote $tmp/hf"; fail=1; }
printf 'w5 w6 w7\n' > "$tmp/text.txt"
expect_job 2 "lansbert prep runs as one process" -- \
  -np 2 "$lb" prep --vocab "$tmp/data/vocab.txt" --input "$tmp/text.txt" --out "$tmp/p" --no-progress
[[ -e $tmp/p ]] && { echo "FAIL: a refused prep wrote $tmp/p"; fail=1; }
expect_job 2 "lansbert vocab runs as one process" -- -np 2 "$lb" vocab --input "$tmp/text.txt" --out "$tmp/v.txt"
expect_job 2 "lansbert tokenize runs as one process" -- -np 2 "$lb" tokenize --vocab "$tmp/data/vocab.txt" "$tmp/text.txt"
expect_job 2 "lansbert bench runs as one process" -- -np 2 "$lb" bench --model bert-tiny --seq-len 8 --batch 1 --steps 1
expect_job 2 "lansbert verify runs as one process" -- -np 2 "$lb" verify --checkpoint "$tmp/ckpt"
timeout 120 "$mpiexec" "${flags[@]}" -x LANSBERT_COMM=single -np 2 "$lb" verify --checkpoint "$tmp/ckpt" > "$tmp/verify.log" 2>&1 &&
  [[ $(grep -c "^ok .*/step-000000003: step 3 of a 1-rank run" "$tmp/verify.log") == 2 ]] ||
  { echo "FAIL: verify copies with LANSBERT_COMM=single: $(cat "$tmp/verify.log")"; fail=1; }
# Each copy with its own output, as the user says: allowed.
timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -x LANSBERT_COMM=single -np 2 bash -c \
  'exec "$0" prep --vocab "$1" --input "$2" --out "$3/p$OMPI_COMM_WORLD_RANK" --no-progress' \
  "$lb" "$tmp/data/vocab.txt" "$tmp/text.txt" "$tmp" > "$tmp/own.log" 2>&1 &&
  compgen -G "$tmp/p0/*.lbs" > /dev/null && compgen -G "$tmp/p1/*.lbs" > /dev/null ||
  { echo "FAIL: prep copies with LANSBERT_COMM=single: $(cat "$tmp/own.log")"; fail=1; }
exit $fail
