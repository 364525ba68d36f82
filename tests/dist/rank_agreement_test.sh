#!/usr/bin/env bash
# `lansbert train` under mpirun refuses ranks that do not see the same job (rank_agreement.h):
# an MPMD launch where rank 1 has another --set exits 2 naming the differing keys with both
# values; ranks started in different working directories, so that one relative data.train
# holds other shards of as many samples, or one relative checkpoint.dir a different checkpoint
# on each (as node-local disks would), exit 2 naming the digest, the positions or the
# checkpoint's files (two runs at the same step); the same
# launch with identical views trains; and bench-comm ranks with other options exit 2.
# Usage: rank_agreement_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH MPIEXEC FLAGS...
source "$(dirname "$0")/../cli/train_test_setup.sh" "$@"
mpiexec=$4; shift 4; flags=("$@")
mkdir -p "$tmp/a" "$tmp/b"
cat > "$tmp/tiny.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 16, micro_batch: 8}
schedule: {total_steps: 6}
checkpoint: {dir: ck, every_steps: 0}
logging: {every_steps: 1}
YAML
run=("$lb" train --config "$tmp/tiny.yaml")
# expect NAME RC TEXT...: the log of the last launch ($tmp/NAME.log) ended with RC and holds each TEXT.
expect() {
  local name=$1 want=$2 got=$3; shift 3
  (( got == want )) || { echo "FAIL: $name exited $got (want $want)"; tail -5 "$tmp/$name.log"; fail=1; }
  for text in "$@"; do
    grep -qF -- "$text" "$tmp/$name.log" || { echo "FAIL: $name: no '$text' in its output"; tail -5 "$tmp/$name.log"; fail=1; }
  done
}

# Rank 1 with another learning rate and seed.
(cd "$tmp/a" && "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS -np 1 "${run[@]}" : -np 1 "${run[@]}" \
  --set optimizer.lr=0.5 --set seed=3) > "$tmp/set.log" 2>&1
expect set 2 $? "rank 1 (host " "resolved config, command line or view of the shards not as on rank 0: " \
  "optimizer.lr is 0.5 here, 0.007 on rank 0; seed is 3 here, 12345 on rank 0"
[[ ! -e $tmp/a/ck/final ]] || { echo "FAIL: a refused launch wrote a checkpoint"; fail=1; }

# One relative data.train, two directories holding shards of the same text and sample count,
# masked at another rate (as shards copied from another prep run would be): their digests differ.
printf 'w%d w%d w%d w%d w%d w%d .\n' $(seq 5 4000 | awk '{print 5 + ($1 * 7919) % 59}') > "$tmp/text.txt"
for d in a:0.15 b:0.1; do
  "$lb" prep --vocab "$tmp/data/vocab.txt" --input "$tmp/text.txt" --out "$tmp/${d%%:*}/data" --seq-len 32 --max-pred 5 \
    --masked-lm-prob "${d#*:}" --no-progress > /dev/null || { echo "FAIL: prep ${d%%:*}"; fail=1; }
done
rel=(--set 'data.train=[data/*.lbs]' --set checkpoint.dir=ck-data)
"$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS -np 1 -wdir "$tmp/a" "${run[@]}" "${rel[@]}" : \
  -np 1 -wdir "$tmp/b" "${run[@]}" "${rel[@]}" > "$tmp/data.log" 2>&1
expect data 2 $? "rank 1 (host " "shards.train_digest is "
grep -q "shards.train_samples" "$tmp/data.log" && { echo "FAIL: the two preps were meant to hold as many samples"; fail=1; }

# One relative checkpoint.dir, two directories: rank 0 finds step 2, rank 1 step 3.
(cd "$tmp/a" && "${run[@]}" --stop-at-step 2 > /dev/null) && (cd "$tmp/b" && "${run[@]}" --stop-at-step 3 > /dev/null) ||
  { echo "FAIL: single-rank runs"; fail=1; }
"$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS -np 1 -wdir "$tmp/a" "${run[@]}" --resume latest : \
  -np 1 -wdir "$tmp/b" "${run[@]}" --resume latest > "$tmp/position.log" 2>&1
expect position 2 $? "rank 1 (host " "position in the run not as on rank 0: " "step is 3 here, 2 on rank 0" \
  "put checkpoint.dir on a file system every host shares"

# Both at step 2, but of two runs (another seed: other weights): the checkpoints' files differ.
rm -rf "$tmp/b/ck" && (cd "$tmp/b" && "${run[@]}" --set seed=5 --stop-at-step 2 > /dev/null) ||
  { echo "FAIL: the second single-rank run"; fail=1; }
"$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS -np 1 -wdir "$tmp/a" "${run[@]}" --resume latest : \
  -np 1 -wdir "$tmp/b" "${run[@]}" --resume latest > "$tmp/files.log" 2>&1
expect files 2 $? "rank 1 (host " "position in the run not as on rank 0: checkpoint_files.model.safetensors is "

# The same view on both ranks (rank 1 at step 2 as well) trains on.
rm -rf "$tmp/b/ck" && cp -r "$tmp/a/ck" "$tmp/b/ck"
"$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS -np 1 -wdir "$tmp/a" "${run[@]}" --resume latest : \
  -np 1 -wdir "$tmp/b" "${run[@]}" --resume latest > "$tmp/same.log" 2>&1
expect same 0 $? "step 6/6"
# bench-comm with another size on rank 1 (it once waited forever in a collective rank 0 never
# started): exit 2 naming the option, well inside the timeout.
comm=("$lb" bench-comm --iters 1 --warmup 0 --no-baseline)
timeout 60 "$mpiexec" "${flags[@]}" -np 1 "${comm[@]}" --max-bytes 1K : -np 1 "${comm[@]}" --max-bytes 64K \
  > "$tmp/comm.log" 2>&1
expect comm 2 $? "rank 1 (host " "bench-comm options not as on rank 0: --max-bytes is 65536 here, 1024 on rank 0"
(( fail )) && exit 1
echo "rank agreement: ok"
