#!/usr/bin/env bash
# Two runs of `lansbert train` on one checkpoint.dir (core/dir_lock.h): while a run trains,
# a second one, fresh or --resume latest, is refused with exit 2 naming the first (program,
# pid, host) and changes nothing in the directory; once the first has ended (here by
# SIGTERM, which checkpoints), the second resumes it. A --dry-run never takes the lock.
# Usage: checkpoint_lock_cli_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH
source "$(dirname "$0")/train_test_setup.sh" "$@"
cat > "$tmp/run.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 32, layers: 1, heads: 2, intermediate: 64, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 16, micro_batch: 16}
schedule: {total_steps: 100000000}
checkpoint: {dir: $tmp/ckpt, every_steps: 0}
logging: {every_steps: 1}
YAML

# wait_for COND: polls COND for up to 60 s.
wait_for() {
  for _ in $(seq 1200); do eval "$1" && return 0; sleep 0.05; done
  echo "FAIL: timed out waiting for: $1"; fail=1; return 1
}
snapshot() {  # all but the metrics the running run appends to
  (cd "$tmp/ckpt" && find . ! -name metrics.jsonl -printf '%p %s %T@\n' | sort && cat .lansbert.lock) | md5sum; }

# The first run: a checkpoint at step 1, then resumed and left training.
"$lb" train --config "$tmp/run.yaml" --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: first run"; fail=1; }
"$lb" train --config "$tmp/run.yaml" --resume latest > "$tmp/first.log" 2>&1 &
first=$!
wait_for "grep -q '^step ' '$tmp/first.log'"
grep -q "lansbert train, pid $first on " "$tmp/ckpt/.lansbert.lock" ||
  { echo "FAIL: the lock file does not name the run: $(cat "$tmp/ckpt/.lansbert.lock")"; fail=1; }
before=$(snapshot)

expect_refused() {  # label, then the train options
  local label=$1; shift
  # (timeout: without the lock this run would train on and on)
  local err; err=$(timeout 120 "$lb" train --config "$tmp/run.yaml" "$@" 2>&1 >/dev/null); local rc=$?
  if [[ $rc != 2 || $err != *"checkpoint.dir $tmp/ckpt is in use by another run (lansbert train, pid $first on "* ]]; then
    echo "FAIL: $label beside a running one: rc $rc (want 2): $err"; fail=1
  fi
}
expect_refused "a resumed run" --resume latest
expect_refused "a fresh run"
[[ $(snapshot) == "$before" ]] || { echo "FAIL: a refused run changed the checkpoint directory"; fail=1; }
# Planning a run reads the directory but never locks it.
"$lb" train --config "$tmp/run.yaml" --resume latest --dry-run >/dev/null 2>&1 ||
  { echo "FAIL: --dry-run beside a running run"; fail=1; }

kill -TERM "$first"
rc=0; wait "$first" || rc=$?
(( rc == 0 )) || { echo "FAIL: the first run on SIGTERM: exit $rc: $(tail -3 "$tmp/first.log")"; fail=1; }
stopped=$(sed -n 's/^lansbert: stopped by SIGTERM after step \([0-9]*\);.*/\1/p' "$tmp/first.log")
[[ -n $stopped ]] || { echo "FAIL: no stop line: $(tail -3 "$tmp/first.log")"; fail=1; }
# The lock went with its holder: the second run now continues the first.
"$lb" train --config "$tmp/run.yaml" --resume latest --stop-at-step $((stopped + 1)) > "$tmp/second.log" 2>&1 ||
  { echo "FAIL: resuming after the first run ended: $(tail -3 "$tmp/second.log")"; fail=1; }
grep -q "stopped by --stop-at-step at step $((stopped + 1))" "$tmp/second.log" ||
  { echo "FAIL: the second run did not continue from step $stopped: $(tail -3 "$tmp/second.log")"; fail=1; }
# A held lock file left by a killed run is no lock at all.
"$lb" train --config "$tmp/run.yaml" --resume latest > "$tmp/third.log" 2>&1 &
third=$!
wait_for "grep -q '^step ' '$tmp/third.log'"
kill -KILL "$third"; wait "$third" 2>/dev/null
"$lb" train --config "$tmp/run.yaml" --resume latest --stop-at-step $((stopped + 2)) >/dev/null 2>"$tmp/fourth.err" ||
  { echo "FAIL: resuming after a killed run: $(cat "$tmp/fourth.err")"; fail=1; }

(( fail == 0 )) && echo "checkpoint_lock_cli: ok"
exit $fail
