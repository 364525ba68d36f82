#!/usr/bin/env bash
# One rank of a `lansbert train` job fails on its own (here: rank 1 is given a config file
# that does not exist, through mpirun's MPMD syntax) while rank 0 goes on into the
# collectives. The job must end, non-zero, within 60 s, with a message naming the rank and
# the cause and exit status 3 (the missing file's), instead of rank 0 waiting forever. And a
# metrics file that rank 0 cannot write stops every rank after a checkpoint (exit 5), as does
# a damaged data.train record (exit 4).
# Usage: train_rank_failure_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH MPIEXEC FLAGS...
source "$(dirname "$0")/../cli/train_test_setup.sh" "$@"
mpiexec=$4; shift 4; flags=("$@")
cat > "$tmp/tiny.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 8}
schedule: {total_steps: 1000}
checkpoint: {dir: $tmp/ckpt, every_steps: 0}
logging: {metrics_file: "-"}
YAML
start=$(date +%s)
timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 \
  -np 1 "$lb" train --config "$tmp/tiny.yaml" : \
  -np 1 "$lb" train --config "$tmp/missing.yaml" > "$tmp/log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
fail=0
if (( rc == 0 || rc == 124 )); then echo "FAIL: job exit $rc (0 = not aborted, 124 = hung)"; fail=1; fi
# The job's status is the failing rank's own exit code (3: a missing file), as one process would give.
if (( rc != 3 )); then echo "FAIL: job exit $rc, expected 3 (rank 1's missing config)"; fail=1; fi
if (( elapsed > 60 )); then echo "FAIL: the job took ${elapsed}s to end"; fail=1; fi
grep -q "^lansbert: error \[rank 1 on [^]]*\]: not found: config .*missing.yaml" "$tmp/log" \
  || { echo "FAIL: no message naming rank 1 and the missing config"; fail=1; }
(( fail )) && { cat "$tmp/log"; exit 1; }
echo "rank failure: job ended with exit $rc in ${elapsed}s"

# Rank 0 alone writes the metrics file: when it cannot (here a 200 KiB file size limit on the
# ranks, not on mpirun, whose shared memory needs more), every rank learns of it, they write
# the step's checkpoint together, and every rank exits 5.
timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -np 2 bash -c 'ulimit -f 200; exec "$0" "$@"' \
  "$lb" train --config "$tmp/tiny.yaml" --set model.hidden=32 --set model.layers=1 --set model.intermediate=64 \
  --set logging.metrics_file="$tmp/metrics.jsonl" --set logging.every_steps=1 --set schedule.total_steps=5000 \
  --set batch.micro_batch=16 > "$tmp/mlog" 2>&1
rc=$?
step=$(sed -n 's/.*\[rank 1 on .*the run stopped after step \([0-9]*\) with its checkpoint written.*/\1/p' "$tmp/mlog")
if (( rc != 5 )) || [[ -z $step || ! -d $tmp/ckpt/step-$(printf %09d "${step:-0}") ]] ||
   ! grep -q "\[rank 0 on .*metrics.jsonl: write failed: File too large; the run stopped after step $step " "$tmp/mlog"; then
  echo "FAIL: a metrics file rank 0 cannot write: exit $rc, step '${step}'"; grep -v '^$' "$tmp/mlog" | tail -8; exit 1
fi
echo "metrics failure: job ended with exit 5 after the checkpoint of step $step"

# A damaged data.train record that one rank's sampler reaches mid-run: every rank stops after
# the last completed step's checkpoint, and every rank exits 4, the damage's code.
mkdir -p "$tmp/rot" && cp "$tmp/data/shards/"*.lbs "$tmp/rot/"
rotten=$(ls "$tmp/rot/"*.lbs | head -1)
printf '\x01' | dd of="$rotten" bs=1 seek=$(( $(stat -c %s "$rotten") / 2 )) conv=notrunc 2>/dev/null
timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -np 2 "$lb" train --config "$tmp/tiny.yaml" \
  --set "data.train=$tmp/rot/*.lbs" --set "checkpoint.dir=$tmp/ckpt-rot" --set model.hidden=32 --set model.layers=1 \
  --set model.intermediate=64 --set batch.micro_batch=16 --set schedule.total_steps=5000 > "$tmp/rlog" 2>&1
rc=$?
ranks=$(grep -c "corrupt: .*the run stopped after step [0-9]* with its checkpoint written" "$tmp/rlog")
if (( rc != 4 || ranks != 2 )) || ! compgen -G "$tmp/ckpt-rot/step-*" > /dev/null; then
  echo "FAIL: a damaged record mid-run on 2 ranks: exit $rc, $ranks ranks stopped after a checkpoint"
  grep -v '^$' "$tmp/rlog" | tail -8; exit 1
fi
echo "damaged record: both ranks ended with exit 4 after $(basename "$(readlink "$tmp/ckpt-rot/latest")")"
