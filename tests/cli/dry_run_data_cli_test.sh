#!/usr/bin/env bash
# `lansbert train --dry-run` on data it can read runs the trainer's start-up checks of it: a
# config the run would refuse (shape, masking, vocabulary size, batch against the samples, a
# held-out set of another shape, files of the wrong data.format) is refused by the plan too,
# after the plan, with the run's message and exit code; data that fits says so; data not
# found is still a plan (exit 0). Nothing is written.
# Usage: dry_run_data_cli_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH
source "$(dirname "$0")/train_test_setup.sh" "$@"
write_tiny_yaml "$tmp/good.yaml"
has() {  # OUTPUT WANT: WANT is a substring of OUTPUT
  [[ $1 == *"$2"* ]] || { echo "FAIL: no '$2' in:"; echo "$1" | tail -12; fail=1; }
}

out=$("$lb" train --config "$tmp/good.yaml" --dry-run) || { echo "FAIL: dry run of a good config exited $?"; fail=1; }
has "$out" "data check          : the shards fit the config and the model"
# Each refusal as the run gives it (the run's own refusals: train_cli_test.sh).
expect_error 2 "data.seq_len: config says 64, the shards hold 32" train --config "$tmp/good.yaml" --dry-run \
  --set data.seq_len=64
expect_error 2 "data.max_pred: config says 20, the shards hold 5" train --config "$tmp/good.yaml" --dry-run \
  --set data.max_pred=20
expect_error 2 "model.vocab_size: 32 rows cannot hold the" train --config "$tmp/good.yaml" --dry-run \
  --set model.vocab_size=32
expect_error 2 "batch.global_batch: 1048576 exceeds the" train --config "$tmp/good.yaml" --dry-run \
  --set batch.global_batch=1048576 --set batch.micro_batch=16
expect_error 2 "data.masking: config says dynamic, the shards are masked (static)" train --config "$tmp/good.yaml" \
  --dry-run --set data.masking=dynamic
# data.format hdf5: NVIDIA's training-file rule for data.train, and only HDF5 files.
expect_error 2 "data.train: 1 file matches $tmp/data/shards/*.lbs, none with 'training' in its name" \
  train --config "$tmp/good.yaml" --dry-run --set data.format=hdf5
mkdir -p "$tmp/named" && cp "$tmp/data/shards/"*0.lbs "$tmp/named/wiki_training_0.lbs"
expect_error 2 "data.train: $tmp/named/wiki_training_0.lbs: not an HDF5 file" train --config "$tmp/good.yaml" \
  --dry-run --set data.format=hdf5 --set "data.train=[$tmp/named]"
"$lb" train --config "$tmp/good.yaml" --dry-run --set data.format=lbs >/dev/null ||
  { echo "FAIL: data.format lbs on lansbert shards"; fail=1; }
# The plan is printed before the refusal, which its data line points to.
out=$("$lb" train --config "$tmp/good.yaml" --dry-run --set data.seq_len=64 2>/dev/null)
has "$out" "data check          : refused (the error below)"
has "$out" "world size          : 1"
# Held-out shards are checked as the run checks them.
mkdir -p "$tmp/notes" && echo "not a shard" > "$tmp/notes/held.lbs"
expect_error 4 "data.eval: $tmp/notes/held.lbs: wrong magic at byte offset 0" train --config "$tmp/good.yaml" \
  --dry-run --set "data.eval=[$tmp/notes/held.lbs]"
# data.eval not found here does not skip the check of data.train, which is found.
expect_error 2 "data.seq_len: config says 64, the shards hold 32" train --config "$tmp/good.yaml" --dry-run \
  --set data.seq_len=64 --set "data.eval=[$tmp/nowhere/*.lbs]"
# A blend: each source's share of the run and how many times over the run reads it; a source
# that is also in another one is refused by name.
mkdir -p "$tmp/copy" && cp "$tmp/data/shards/"*.lbs "$tmp/copy/"
samples=$("$lb" train --config "$tmp/good.yaml" --dry-run | sed -n 's/.*data.train *: 1 file, \([0-9]*\) samples.*/\1/p')
out=$("$lb" train --config "$tmp/good.yaml" --dry-run --set "data.train=[$tmp/data/shards/*.lbs, $tmp/copy]" \
      --set 'data.weights=[3, 1]') || { echo "FAIL: dry run of a blend exited $?"; fail=1; }
has "$out" "    data.train[0]     : $tmp/data/shards/*.lbs ($samples samples), weight 3: 75.00% of the samples, \
$(awk -v n="$samples" 'BEGIN { printf "%.2f", 400 * 32 * 0.75 / n }') epochs of it in 400 steps"
has "$out" "    data.train[1]     : $tmp/copy ($samples samples), weight 1: 25.00% of the samples"
expect_error 2 "data.train: $tmp/copy/shard-00000.lbs: in data.train[0] ($tmp/copy) and in data.train[1] ($tmp/copy/*)" \
  train --config "$tmp/good.yaml" --dry-run --set "data.train=[$tmp/copy, $tmp/copy/*]" --set 'data.weights=[1, 1]'
expect_error 2 "data.weights: 1 weight for the 2 entries of data.train (one each)" \
  train --config "$tmp/good.yaml" --dry-run --set "data.train=[$tmp/copy, $tmp/data/shards]" --set 'data.weights=1'
# Named held-out sets: each entry's samples and how many every evaluation reads of it.
out=$("$lb" train --config "$tmp/good.yaml" --dry-run --set "data.eval=[$tmp/data/shards/*.lbs, $tmp/copy]" \
      --set 'evaluation.names=[wiki, books]' --set evaluation.max_sequences=100) ||
  { echo "FAIL: dry run of named sets exited $?"; fail=1; }
has "$out" "    data.eval[0]      : $tmp/data/shards/*.lbs ($samples samples): set wiki, 100 evaluated"
has "$out" "    data.eval[1]      : $tmp/copy ($samples samples): set books, 100 evaluated"
expect_error 2 "data.eval: $tmp/copy/shard-00000.lbs: in data.eval[0] ($tmp/copy) and in data.eval[1] ($tmp/copy/*)" \
  train --config "$tmp/good.yaml" --dry-run --set "data.eval=[$tmp/copy, $tmp/copy/*]" --set 'evaluation.names=[a, b]'
# Data not found is still a plan: the line says so, the exit is 0.
out=$("$lb" train --config "$tmp/good.yaml" --dry-run --set "data.train=[$tmp/nowhere/*.lbs]") ||
  { echo "FAIL: dry run without data exited $?"; fail=1; }
has "$out" "data.train          : NOT READABLE here, a run would stop: data.train: no shard files match"
[[ $out != *"data check"* ]] || { echo "FAIL: a data check without data: $out"; fail=1; }
[[ ! -e $tmp/ckpt ]] || { echo "FAIL: a dry run wrote $(ls -A "$tmp/ckpt")"; fail=1; }
(( fail )) && exit 1
echo "dry_run_data_cli: ok"
