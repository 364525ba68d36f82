#!/usr/bin/env bash
# Stopping a `lansbert train` job through mpirun: SIGUSR1 sent to mpirun (what a user or a
# job script can reach; Open MPI forwards it to every rank and waits for them) makes every
# rank finish its step, write the step's checkpoint together and exit 0, and `--resume
# latest` goes on from it. (SIGTERM to mpirun cannot do this: mpirun SIGKILLs the ranks one
# second after forwarding it; docs/training.md.)
# Usage: train_signal_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH MPIEXEC FLAGS...
source "$(dirname "$0")/../cli/train_test_setup.sh" "$@"
mpiexec=$4; shift 4; flags=("$@")
cat > "$tmp/tiny.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 32, layers: 1, heads: 2, intermediate: 64, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 16}
schedule: {total_steps: 100000}
checkpoint: {dir: $tmp/ckpt, every_steps: 0}
logging: {every_steps: 1, metrics_file: "-"}
YAML
timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -np 2 "$lb" train --config "$tmp/tiny.yaml" \
  > "$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "^step 3/" "$tmp/log" 2>/dev/null && break; sleep 0.1; done
grep -q "^step 3/" "$tmp/log" || { echo "FAIL: the job did not reach step 3"; cat "$tmp/log"; kill $pid; exit 1; }
# The signal goes to mpirun itself, the child of `timeout` (which would die of it).
mpirun_pid=$(pgrep -P $pid | head -1)
[[ -n $mpirun_pid ]] || { echo "FAIL: no mpirun under timeout"; kill $pid; exit 1; }
kill -USR1 "$mpirun_pid"
rc=0; wait $pid || rc=$?
step=$(sed -n 's/.*stopped by SIGUSR1 after step \([0-9]*\).*/\1/p' "$tmp/log")
if (( rc != 0 )) || [[ -z $step ]] || [[ $(readlink "$tmp/ckpt/latest") != step-$(printf %09d "$step") ]]; then
  echo "FAIL: SIGUSR1 to mpirun: exit $rc (124: it hung), stop step '$step', latest $(readlink "$tmp/ckpt/latest")"
  cat "$tmp/log"; exit 1
fi
echo "SIGUSR1 to mpirun: both ranks stopped after the checkpoint of step $step, exit 0"
timeout 120 "$mpiexec" "${flags[@]}" -x OMP_NUM_THREADS=1 -np 2 "$lb" train --config "$tmp/tiny.yaml" \
  --resume latest --stop-at-step $((step + 1)) > "$tmp/resume.log" 2>&1 ||
  { echo "FAIL: resume after SIGUSR1"; cat "$tmp/resume.log"; exit 1; }
grep -q "^step $((step + 1))/" "$tmp/resume.log" || { echo "FAIL: resume did not run step $((step + 1))"; cat "$tmp/resume.log"; exit 1; }
echo "train_signal: ok"
