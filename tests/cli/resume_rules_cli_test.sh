#!/usr/bin/env bash
# What a resume and a new phase's --init-from accept, from the command line: a resume continues
# the same run (its model, global batch, sequence shape and optimizer; another micro-batch is
# allowed and said), a new phase starts from weights of the same model and vocabulary, and
# checkpoint.dir must be a directory of the run's own. Each refusal names the key and exits 2,
# before anything is written.
# Usage: resume_rules_cli_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH
source "$(dirname "$0")/train_test_setup.sh" "$@"
write_tiny_yaml "$tmp/good.yaml"
y=(train --config "$tmp/good.yaml")
"$lb" "${y[@]}" --stop-at-step 2 >/dev/null 2>&1 || { echo "FAIL: the first run"; fail=1; }
ckpt=$(readlink -f "$tmp/ckpt/latest")

# checkpoint.dir: not a checkpoint itself (its checkpoints would nest in it, and --resume latest
# would find its trainer.json first), and no file or directory where `latest`/`final` go.
expect_error 2 "$ckpt (checkpoint.dir) is itself a checkpoint (it holds trainer.json): give the run a directory of its own; to continue that run exactly, --resume $ckpt with another checkpoint.dir; to start a new phase from it, --init-from $ckpt" \
  "${y[@]}" --set "checkpoint.dir=$ckpt" --init-from "$ckpt" --stop-at-step 3
for name in latest final; do
  mkdir -p "$tmp/own-$name" && echo "my notes" > "$tmp/own-$name/$name"
  expect_error 2 "$tmp/own-$name/$name is not a checkpoint pointer (a symlink) but a file, which a checkpoint would replace" \
    "${y[@]}" --set "checkpoint.dir=$tmp/own-$name" --stop-at-step 1
  [[ $(cat "$tmp/own-$name/$name") == "my notes" ]] || { echo "FAIL: $name was touched"; fail=1; }
done
# A checkpoint.dir copied with its links followed holds `latest` as a directory: the way back.
cp -rL "$tmp/ckpt" "$tmp/copied"
expect_error 2 "$tmp/copied/latest is not a checkpoint pointer (a symlink) but a directory, which a checkpoint would replace: move it away or set another checkpoint.dir (a copy that followed the links? put the link back: rm -r $tmp/copied/latest && ln -s step-NNNNNNNNN $tmp/copied/latest)" \
  "${y[@]}" --set "checkpoint.dir=$tmp/copied" --resume latest --stop-at-step 3
# ... and the advice works.
step=$(basename "$(readlink -f "$tmp/ckpt/latest")")
rm -r "$tmp/copied/latest" && ln -s "$step" "$tmp/copied/latest"
"$lb" "${y[@]}" --set "checkpoint.dir=$tmp/copied" --resume latest --stop-at-step 4 >/dev/null 2>&1 ||
  { echo "FAIL: resume after putting the link back"; fail=1; }

# A resume on data.train of fewer samples than the checkpoint's position needs is refused,
# naming the checkpoint, and leaves checkpoint.dir byte for byte as it was (the lock's line too).
"$mk" "$tmp/d-small" 32 5 16 >/dev/null || { echo "FAIL: make the small data"; fail=1; }
before=$(cd "$tmp/ckpt" && find . -type f -exec md5sum {} + | sort -k2)
expect_error 2 "$ckpt: data position (epoch 0, consumed 64) does not start a global batch of 32 in " \
  "${y[@]}" --set "data.train=$tmp/d-small/shards/*.lbs" --resume latest
[[ $(cd "$tmp/ckpt" && find . -type f -exec md5sum {} + | sort -k2) == "$before" ]] ||
  { echo "FAIL: a refused resume changed checkpoint.dir"; fail=1; }

# A resume: another micro-batch goes on (said); another sequence shape is a new phase.
out=$("$lb" "${y[@]}" --set batch.micro_batch=8 --resume latest --stop-at-step 3 2>&1) ||
  { echo "FAIL: resume with batch.micro_batch 8: $out"; fail=1; }
[[ $out == *"note: batch.micro_batch 8 is not the checkpoint's 16: the same samples per update"* ]] ||
  { echo "FAIL: no micro-batch note: $out"; fail=1; }
[[ $out == *"resuming from "*"step-000000002 at step 2"* ]] || { echo "FAIL: resumed where: $out"; fail=1; }
# Another schedule or learning rate goes on too, and is said (Megatron refuses it unless told).
cp -r "$tmp/ckpt" "$tmp/ckpt-sched"
out=$("$lb" "${y[@]}" --set "checkpoint.dir=$tmp/ckpt-sched" --set schedule.total_steps=500 --set optimizer.lr=0.01 \
  --resume latest --stop-at-step 4 2>&1) || { echo "FAIL: resume with another schedule: $out"; fail=1; }
[[ $out == *"note: schedule.total_steps is 400 in the checkpoint, 500 in the config: the updates from here follow the config's schedule"* &&
   $out == *"note: optimizer.lr is 0.02 in the checkpoint, 0.01 in the config: the updates from here follow the config's optimizer"* ]] ||
  { echo "FAIL: no schedule/optimizer notes: $out"; fail=1; }
"$mk" "$tmp/d64" 64 10 >/dev/null || { echo "FAIL: make 64-token data"; fail=1; }
p2=(--set "data.train=$tmp/d64/shards/*.lbs" --set data.seq_len=64 --set data.max_pred=10)
expect_error 2 "data.seq_len is 32 in the checkpoint, 64 in the config: a run resumes on the data it started with; to start a new phase from this checkpoint use --init-from" \
  "${y[@]}" "${p2[@]}" --set "checkpoint.dir=$tmp/p2" --resume "$ckpt"
expect_error 2 "--stop-at-step 1: the run resumes at step 3, past it" "${y[@]}" --resume latest --stop-at-step 1
expect_error 2 "incompatible checkpoint: batch.global_batch is 32 in the checkpoint, 64 in the config" \
  "${y[@]}" --set batch.global_batch=64 --resume latest
expect_error 2 "the checkpoint's run used optimizer.name lans, this run uses lamb: a resume continues the same run" \
  "${y[@]}" --set optimizer.name=lamb --resume latest
# ... which --init-from starts, from the same model only: the heads change no tensor's shape.
"$lb" "${y[@]}" "${p2[@]}" --set "checkpoint.dir=$tmp/p2" --init-from "$ckpt" --stop-at-step 1 >/dev/null 2>&1 ||
  { echo "FAIL: phase 2 by --init-from"; fail=1; }
expect_error 2 "--init-from $ckpt: the checkpoint's model.heads is 2 but the config sets model.heads: 4" \
  "${y[@]}" --set model.heads=4 --set "checkpoint.dir=$tmp/heads" --init-from "$ckpt"
expect_error 2 "--init-from $ckpt: the checkpoint's run used optimizer.name lans, this run uses lamb: phase.phase_start keep_moments keeps its moments; start the new rule with phase.phase_start: reset" \
  "${y[@]}" --set optimizer.name=lamb --set "checkpoint.dir=$tmp/lamb" --init-from "$ckpt"
"$lb" "${y[@]}" --set optimizer.name=lamb --set phase.phase_start=reset --set "checkpoint.dir=$tmp/lamb" \
  --init-from "$ckpt" --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: lamb from lans's weights with reset"; fail=1; }
expect_error 2 "--init-from $tmp/good.yaml: a file, not a directory" "${y[@]}" --set "checkpoint.dir=$tmp/f" --init-from "$tmp/good.yaml"

# Vocabularies: the same tokens in another order make other ids. Shards of two are not one set,
# nor training and held-out data, nor a phase and the one before it.
sed -n 1,5p "$tmp/data/vocab.txt" > "$tmp/vocab-b.txt"; sed -n '6,$p' "$tmp/data/vocab.txt" >> "$tmp/vocab-b.txt"
sed -n 1,5p "$tmp/data/vocab.txt" > "$tmp/vocab-c.txt"; sed -n '6,$p' "$tmp/data/vocab.txt" | tac >> "$tmp/vocab-c.txt"
for i in $(seq 240); do sed -n '6,$p' "$tmp/data/vocab.txt" | grep -v '^##' | shuf -n 12 -r --random-source=<(yes) | tr '\n' ' '; echo; (( i % 8 )) || echo; done > "$tmp/corpus.txt"
for v in b c; do
  "$lb" prep --vocab "$tmp/vocab-$v.txt" --input "$tmp/corpus.txt" --out "$tmp/s$v" --seq-len 32 --max-pred 5 >/dev/null 2>&1 ||
    { echo "FAIL: prep with vocab $v"; fail=1; }
done
expect_error 2 "made with another vocabulary (hash" "${y[@]}" --set data.vocab= --set "data.train=[$tmp/sb/*.lbs, $tmp/sc/*.lbs]" \
  --set "checkpoint.dir=$tmp/mixed"
expect_error 2 "data.eval: the shards were made with another vocabulary" "${y[@]}" --set data.vocab= \
  --set "data.train=$tmp/sb/*.lbs" --set "data.eval=$tmp/sc/*.lbs" --set "checkpoint.dir=$tmp/mixed-eval"
"$lb" "${y[@]}" --set "data.vocab=$tmp/vocab-b.txt" --set "data.train=$tmp/sb/*.lbs" --set "checkpoint.dir=$tmp/vb" \
  --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: a run on vocab b"; fail=1; }
expect_error 2 "the checkpoint was trained on shards of the vocabulary 0x" "${y[@]}" --set "data.vocab=$tmp/vocab-c.txt" \
  --set "data.train=$tmp/sc/*.lbs" --set "checkpoint.dir=$tmp/vc" --init-from "$tmp/vb"
# Masking: statically masked shards carry their masks and may mix whole-word and plain ones
# (data.whole_word then needs every one whole-word, the first in path order, a-ww, included or
# not); unmasked ones are masked at load time by
# one setting, so theirs must agree.
prep=(prep --vocab "$tmp/vocab-b.txt" --input "$tmp/corpus.txt" --seq-len 32 --max-pred 5)
"$lb" "${prep[@]}" --out "$tmp/a-ww" --whole-word >/dev/null 2>&1 || { echo "FAIL: prep --whole-word"; fail=1; }
"$lb" "${prep[@]}" --out "$tmp/dyn-a" --dynamic-masking >/dev/null 2>&1 || { echo "FAIL: prep --dynamic-masking"; fail=1; }
"$lb" "${prep[@]}" --out "$tmp/dyn-b" --dynamic-masking --masked-lm-prob 0.2 >/dev/null 2>&1 ||
  { echo "FAIL: prep --masked-lm-prob 0.2"; fail=1; }
vb=(--set "data.vocab=$tmp/vocab-b.txt")
"$lb" "${y[@]}" "${vb[@]}" --set "data.train=[$tmp/a-ww/*.lbs, $tmp/sb/*.lbs]" --set "checkpoint.dir=$tmp/ww-mixed" \
  --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: static whole-word and plain shards together"; fail=1; }
expect_error 2 "data.whole_word: data.train holds shards masked by prep without --whole-word" "${y[@]}" "${vb[@]}" \
  --set "data.train=[$tmp/a-ww/*.lbs, $tmp/sb/*.lbs]" --set data.whole_word=true --set "checkpoint.dir=$tmp/ww-refused"
expect_error 2 "masked at load time with whole-word masking off and probability 0.2 where $tmp/dyn-a/shard-00000.lbs says off and 0.15" \
  "${y[@]}" "${vb[@]}" --set "data.train=[$tmp/dyn-a/*.lbs, $tmp/dyn-b/*.lbs]" --set "checkpoint.dir=$tmp/dyn-mixed"
[[ ! -e $tmp/mixed && ! -e $tmp/mixed-eval && ! -e $tmp/vc && ! -e $tmp/heads && ! -e $tmp/ww-refused && ! -e $tmp/dyn-mixed ]] ||
  { echo "FAIL: a refused run wrote"; fail=1; }

# --resume auto: one command line for every start of a job. Into an empty checkpoint.dir it
# starts the run (from --init-from when given); once a checkpoint is there it resumes it (the
# --init-from weights are not read again: here they are gone by then), and the run ends where
# one uninterrupted run does. A broken 'latest' is reported, never started over.
auto=("${y[@]}" --set "checkpoint.dir=$tmp/auto" --set schedule.total_steps=5 --resume auto)
cp -a "$ckpt" "$tmp/phase1"
"$lb" "${auto[@]}" --init-from "$tmp/phase1" --stop-at-step 3 > "$tmp/auto1.log" 2>&1 ||
  { echo "FAIL: --resume auto, first start: $(tail -3 "$tmp/auto1.log")"; fail=1; }
grep -qF "note: --resume auto: $tmp/auto holds no checkpoint: starting the run from --init-from $tmp/phase1" "$tmp/auto1.log" ||
  { echo "FAIL: --resume auto did not say it starts: $(head -3 "$tmp/auto1.log")"; fail=1; }
rm -r "$tmp/phase1"
"$lb" "${auto[@]}" --init-from "$tmp/phase1" > "$tmp/auto2.log" 2>&1 ||
  { echo "FAIL: --resume auto, second start: $(tail -3 "$tmp/auto2.log")"; fail=1; }
grep -qF "note: --resume auto: $tmp/auto holds a checkpoint (step-000000003): resuming it (--init-from $tmp/phase1 is where the run began; not read)" "$tmp/auto2.log" &&
  grep -q "resuming from .*step-000000003" "$tmp/auto2.log" && grep -q "^done: step 5," "$tmp/auto2.log" ||
  { echo "FAIL: --resume auto did not resume: $(head -3 "$tmp/auto2.log")"; fail=1; }
cp -a "$ckpt" "$tmp/phase1"
"$lb" "${y[@]}" --set "checkpoint.dir=$tmp/straight" --set schedule.total_steps=5 --init-from "$tmp/phase1" \
  > "$tmp/straight.log" 2>&1 || { echo "FAIL: the uninterrupted run"; fail=1; }
cmp -s "$tmp/auto/final/model.safetensors" "$tmp/straight/final/model.safetensors" ||
  { echo "FAIL: --resume auto's run ends elsewhere than the uninterrupted one"; fail=1; }
# The dry run says which it would do.
"$lb" "${auto[@]}" --dry-run 2>&1 | grep -qF "  start               : --resume auto: $tmp/auto holds a checkpoint (step-000000005): resuming it" ||
  { echo "FAIL: the dry run does not say --resume auto resumes"; fail=1; }
mkdir -p "$tmp/auto-broken" && ln -s step-000000009 "$tmp/auto-broken/latest"
expect_error 3 "--resume auto: $tmp/auto-broken/latest points to step-000000009, which holds no checkpoint" \
  "${y[@]}" --set "checkpoint.dir=$tmp/auto-broken" --resume auto
expect_error 3 "--resume auto: $tmp/auto-broken/latest points to step-000000009, which holds no checkpoint" \
  "${y[@]}" --set "checkpoint.dir=$tmp/auto-broken" --resume auto --dry-run
mkdir -p "$tmp/auto-file" && echo "my notes" > "$tmp/auto-file/latest"
expect_error 2 "$tmp/auto-file/latest is not a checkpoint pointer (a symlink) but a file" \
  "${y[@]}" --set "checkpoint.dir=$tmp/auto-file" --resume auto
mkdir -p "$tmp/auto-final" && ln -s step-000000004 "$tmp/auto-final/final"
expect_error 2 "--resume auto: $tmp/auto-final holds a 'final' pointer but no 'latest' and no checkpoint" \
  "${y[@]}" --set "checkpoint.dir=$tmp/auto-final" --resume auto
[[ $(ls "$tmp/auto-final") == final && $(cat "$tmp/auto-file/latest") == "my notes" ]] || { echo "FAIL: a refused --resume auto wrote"; fail=1; }
# A file where checkpoint.dir (or its parent) should be is the config's error (exit 2), as
# without auto; a symlink to nothing is no empty directory.
expect_error 2 "checkpoint.dir: $tmp/good.yaml exists and is not a directory" \
  "${y[@]}" --set "checkpoint.dir=$tmp/good.yaml" --resume auto
expect_error 2 "checkpoint.dir" "${y[@]}" --set "checkpoint.dir=$tmp/good.yaml/ck" --resume auto
ln -s "$tmp/nowhere-dir" "$tmp/auto-link"
expect_error 2 "--resume auto: checkpoint.dir $tmp/auto-link is a symlink to $tmp/nowhere-dir, which is not there" \
  "${y[@]}" --set "checkpoint.dir=$tmp/auto-link" --resume auto
mkdir -p "$tmp/auto-unpointed" && cp -a "$ckpt" "$tmp/auto-unpointed/"
expect_error 2 "--resume auto: $tmp/auto-unpointed holds $(basename "$ckpt") but no 'latest' pointer (a run stopped between writing a checkpoint and pointing to it?): resume from it with --resume $tmp/auto-unpointed/$(basename "$ckpt") (without --init-from)" \
  "${y[@]}" --set "checkpoint.dir=$tmp/auto-unpointed" --resume auto
"$lb" "${y[@]}" --set "checkpoint.dir=$tmp/auto-unpointed" --resume "$tmp/auto-unpointed/$(basename "$ckpt")" \
  --stop-at-step 3 > /dev/null 2>&1 && [[ -L $tmp/auto-unpointed/latest ]] ||
  { echo "FAIL: the advised resume did not continue and point 'latest'"; fail=1; }
expect_error 2 "--resume latest excludes --init-from: a resume continues a run, --init-from starts one (--resume auto" \
  "${y[@]}" --resume latest --init-from "$ckpt"
(( fail == 0 )) && echo "resume_rules_cli_test: ok"
exit $fail
