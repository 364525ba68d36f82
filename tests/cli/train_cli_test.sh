#!/usr/bin/env bash
# `lansbert train/eval/export` from the command line: bad configs exit 2 with a message
# naming the key and leave an existing checkpoint directory byte-for-byte untouched; a new
# run into a used checkpoint.dir, a resume behind later checkpoints and unwritable output
# paths are refused before the first step; a real
# SIGTERM mid-run ends with exit 0 and a loadable checkpoint; SIGKILL during a checkpoint
# write leaves the previous one loadable and resumable; a metrics file that cannot be written
# or a data.train record that cannot be read stops the run after a checkpoint; export works
# (eval from the command line: eval_cli_test.sh).
# Usage: train_cli_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH
source "$(dirname "$0")/train_test_setup.sh" "$@"
write_tiny_yaml "$tmp/good.yaml"
"$lb" train --config "$tmp/good.yaml" --stop-at-step 2 >/dev/null || { echo "FAIL: first run"; fail=1; }
# Every file's bytes, each entry's size and link target; the lock file's record is part of it:
# a refused run must not leave its pid there.
snapshot() { (cd "$tmp/ckpt" && find . -printf '%p %s %l\n' | sort && find . -type f -exec md5sum {} + | sort -k2) | md5sum; }
before=$(snapshot)

expect_error 2 "batch.global_batch" train --config "$tmp/good.yaml" --set batch.global_batch=33
expect_error 2 "optimizer.lrr: unknown key" train --config "$tmp/good.yaml" --set optimizer.lrr=1
expect_error 2 "precision.dtype" train --config "$tmp/good.yaml" --set precision.dtype=fp8
# `auto` on the CPU is the hand-written attention (cuDNN's never applies there): it trains.
"$lb" train --config "$tmp/good.yaml" --set precision.attention=auto --set "checkpoint.dir=$tmp/ckpt-auto" \
  --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: precision.attention auto on the CPU"; fail=1; }
expect_error 2 "TF32 is a CUDA option" train --config "$tmp/good.yaml" --set precision.tf32=true
expect_error 2 "precision.activations: 16bit stores them in the GEMMs' format: needs dtype bf16 or fp16" \
  train --config "$tmp/good.yaml" --set precision.activations=16bit
expect_error 2 "data.seq_len: config says 64" train --config "$tmp/good.yaml" --set data.seq_len=64
expect_error 3 "data.train" train --config "$tmp/good.yaml" --set 'data.train=/nonexistent/*.lbs'
expect_error 3 "data.eval" train --config "$tmp/good.yaml" --set 'data.eval=/nonexistent/*.lbs'
# Shards of another vocabulary than data.vocab: the message names the file.
cp "$tmp/data/vocab.txt" "$tmp/vocab-other.txt" && echo "extra" >> "$tmp/vocab-other.txt"
expect_error 2 "vocabulary mismatch: the shard was made with a vocab of hash" train --config "$tmp/good.yaml" \
  --set "data.vocab=$tmp/vocab-other.txt"
expect_error 2 "data.vocab $tmp/vocab-other.txt has hash" train --config "$tmp/good.yaml" \
  --set "data.vocab=$tmp/vocab-other.txt"
expect_error 2 "evaluation.every_steps" train --config "$tmp/good.yaml" --set evaluation.every_steps=5
expect_error 2 "incompatible checkpoint" train --config "$tmp/good.yaml" --set model.hidden=32 --resume latest
expect_error 3 "no checkpoint" train --config "$tmp/good.yaml" --resume "$tmp/data"
expect_error 3 "config" train --config "$tmp/missing.yaml"
expect_error 2 "--set optimizer.lr: optimizer.lr must be finite" train --config "$tmp/good.yaml" --set optimizer.lr=-1
expect_error 2 "--set schedule.power: schedule.power must be > 0" train --config "$tmp/good.yaml" --set schedule.power=-1
expect_error 2 "--set schedule.warmup_steps: schedule.warmup_steps 1000 exceeds schedule.total_steps 400" \
  train --config "$tmp/good.yaml" --set schedule.warmup_steps=1000
expect_error 2 "--resume: an empty path" train --config "$tmp/good.yaml" --resume ''
expect_error 2 "--resume latest excludes --init-from" train --config "$tmp/good.yaml" --resume latest --init-from "$tmp/ckpt"
expect_error 2 "unknown command 'trian'" trian --config "$tmp/good.yaml"
printf 'model:\n  preset: bert-tiny\nbatch:\n  micro_batch: many\n' > "$tmp/bad.yaml"
expect_error 2 "bad.yaml:4:16: batch.micro_batch: expected an integer" train --config "$tmp/bad.yaml"
# Output paths are checked before the first step: a new run never lands in a used
# checkpoint.dir (it would have replaced or skipped checkpoints and moved `latest`), and a
# checkpoint.dir, metrics file or TensorBoard directory that cannot be written fails at once,
# creating nothing.
expect_error 2 "holds step-000000002 of an earlier run; continue it with --resume latest" \
  train --config "$tmp/good.yaml" --stop-at-step 1
expect_error 2 "checkpoint.dir: $tmp/good.yaml exists and is not a directory" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/good.yaml"
expect_error 2 "logging.metrics_file: $tmp/data exists and is not a regular file" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/fresh/ck" --set "logging.metrics_file=$tmp/data"
# An existing metrics file is appended to only if it holds metrics: a shard named by mistake is
# refused before the first step, unchanged.
cp "$(ls "$tmp/data/shards/"*.lbs | head -1)" "$tmp/not-metrics.lbs"
sum=$(md5sum < "$tmp/not-metrics.lbs")
expect_error 2 "logging.metrics_file: $tmp/not-metrics.lbs exists and its first line is not a lansbert metrics record" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/fresh/ck" --set "logging.metrics_file=$tmp/not-metrics.lbs"
[[ $(md5sum < "$tmp/not-metrics.lbs") == "$sum" ]] || { echo "FAIL: a refused run wrote into a shard"; fail=1; }
expect_error 2 "logging.tensorboard_dir: $tmp/good.yaml exists and is not a directory" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/fresh/ck" --set "logging.tensorboard_dir=$tmp/good.yaml"
expect_error 5 "checkpoint.dir: /proc/lansbert-test/ck: cannot be created in /proc" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=/proc/lansbert-test/ck"
# A damaged data.eval record is found before training, not after the last step.
mkdir -p "$tmp/badeval"
cp "$(ls "$tmp/data/shards/"*.lbs | head -1)" "$tmp/badeval/e.lbs"
printf '\x01' | dd of="$tmp/badeval/e.lbs" bs=1 seek=300 conv=notrunc 2>/dev/null
expect_error 4 "data.eval: $tmp/badeval/e.lbs: record 0" train --config "$tmp/good.yaml" \
  --set "data.eval=$tmp/badeval/*.lbs" --set "checkpoint.dir=$tmp/fresh/ck"
[[ -e $tmp/fresh ]] && { echo "FAIL: a refused run created $tmp/fresh"; fail=1; }
# A model that cannot fit in this host's memory is a config error, not a failed allocation
# (64 billion parameters: 1 TB of fp32 buffers), and no batch setting is suggested for it ...
expect_error 2 "GiB of this host's memory; no batch setting shrinks them: choose a smaller model" train --config "$tmp/good.yaml" --set model.vocab_size=1000000000 \
  --set "checkpoint.dir=$tmp/fresh/ck"
# ... and sizes past what any data-parallel rank holds are refused from the config alone, before
# a parameter table of 10^8 layers is built.
expect_error 2 "model: 130 billion parameters (vocab_size 2000000000, hidden 64, layers 2, intermediate 128), more than the 68.7 billion" \
  train --config "$tmp/good.yaml" --set model.vocab_size=2000000000 --set "checkpoint.dir=$tmp/fresh/ck"
expect_error 2 "--set model.layers: model.layers 100000000: at most 4096 (bert-large has 24)" \
  train --config "$tmp/good.yaml" --set model.layers=100000000 --set "checkpoint.dir=$tmp/fresh/ck"
[[ $(snapshot) == "$before" ]] || { echo "FAIL: a failed run changed the checkpoint directory"; fail=1; }
# The model's vocab_size must hold the data's vocab, and a preset's size is not silently
# kept for a vocab of another size; a larger model.vocab_size, set explicitly, pads.
sed 's/vocab_size: 64, //' "$tmp/good.yaml" > "$tmp/preset-vocab.yaml"
expect_error 2 "model.vocab_size: preset bert-tiny has 30522, data.vocab $tmp/data/vocab.txt has 64 tokens; set model.vocab_size: 64" \
  train --config "$tmp/preset-vocab.yaml" --set "checkpoint.dir=$tmp/fresh/ck"
expect_error 2 "model.vocab_size: 32 rows cannot hold the 64 tokens of data.vocab" \
  train --config "$tmp/good.yaml" --set model.vocab_size=32 --set "checkpoint.dir=$tmp/fresh/ck"
# A run that (as before that check) trained with the preset's size over a smaller vocab
# resumes without model.vocab_size: the rule is for new runs.
"$lb" train --config "$tmp/preset-vocab.yaml" --set model.vocab_size=30522 --set "checkpoint.dir=$tmp/preset-ck" \
  --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: preset-size run"; fail=1; }
"$lb" train --config "$tmp/preset-vocab.yaml" --set "checkpoint.dir=$tmp/preset-ck" --resume latest \
  --stop-at-step 2 >/dev/null 2>"$tmp/preset-resume.err" ||
  { echo "FAIL: resuming a preset-size run: $(cat "$tmp/preset-resume.err")"; fail=1; }
# schedule.total_steps is the run length for every schedule kind (constant ran 0 steps).
expect_error 2 "schedule.total_steps: must be positive" \
  train --config "$tmp/good.yaml" --set schedule.kind=constant --set schedule.total_steps=0 --set "checkpoint.dir=$tmp/fresh/ck"
# data.whole_word on shards prep masked token by token is refused, not ignored.
expect_error 2 "data.whole_word: data.train holds shards masked by prep without --whole-word" \
  train --config "$tmp/good.yaml" --set data.whole_word=true --set "checkpoint.dir=$tmp/fresh/ck"
[[ -e $tmp/fresh ]] && { echo "FAIL: a refused run created $tmp/fresh"; fail=1; }
"$lb" train --config "$tmp/good.yaml" --set model.vocab_size=72 --set "checkpoint.dir=$tmp/padded" \
  --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: a padded vocab_size (72 for 64 tokens) did not train"; fail=1; }
"$lb" export --checkpoint "$tmp/padded" --out "$tmp/padded-hf" >/dev/null ||
  { echo "FAIL: export of a padded vocab_size"; fail=1; }
grep -q '"vocab_size": 72' "$tmp/padded-hf/config.json" || { echo "FAIL: padded export config.json"; fail=1; }
# model.hidden_act: gelu_tanh trains, exports as Hugging Face's "gelu_new", and a checkpoint of
# one form does not resume as the other.
# (Also logging.tensorboard_dir: auto, the event file under this run's checkpoint.dir; and the
# ETA of a run stopped early says which step it counts to.)
"$lb" train --config "$tmp/good.yaml" --set model.hidden_act=gelu_tanh --set "checkpoint.dir=$tmp/tanh" \
  --set logging.tensorboard_dir=auto --set logging.every_steps=1 \
  --stop-at-step 1 > "$tmp/tanh.log" 2>&1 || { echo "FAIL: model.hidden_act: gelu_tanh did not train"; fail=1; }
compgen -G "$tmp/tanh/tensorboard/events.out.tfevents.*" >/dev/null ||
  { echo "FAIL: logging.tensorboard_dir auto: no event file in $tmp/tanh/tensorboard"; fail=1; }
grep -qE "^step 1/[0-9]+ .*\| ETA [0-9a-z.]+ to step 1$" "$tmp/tanh.log" ||
  { echo "FAIL: no 'ETA ... to step 1' in: $(grep '^step' "$tmp/tanh.log")"; fail=1; }
"$lb" export --checkpoint "$tmp/tanh" --out "$tmp/tanh-hf" >/dev/null || { echo "FAIL: export of gelu_tanh"; fail=1; }
grep -q '"hidden_act": "gelu_new"' "$tmp/tanh-hf/config.json" || { echo "FAIL: gelu_tanh export config.json"; fail=1; }
expect_error 2 "incompatible checkpoint" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/tanh" --resume latest --stop-at-step 2
# Nor does a phase start from weights of the other form: a lansbert checkpoint, or a Hugging
# Face directory whose config.json names it.
expect_error 2 "the weights were trained with hidden_act 'gelu_tanh' but the config sets model.hidden_act: gelu" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/from-tanh" --init-from "$tmp/tanh" --stop-at-step 1
expect_error 2 "config.json: the weights were trained with hidden_act 'gelu_new'" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/from-tanh-hf" --init-from "$tmp/tanh-hf" --stop-at-step 1
"$lb" train --config "$tmp/good.yaml" --set model.hidden_act=gelu_tanh --set "checkpoint.dir=$tmp/from-tanh-hf" \
  --init-from "$tmp/tanh-hf" --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: gelu_tanh from its own export"; fail=1; }
# transformers' other names of the tanh form are the tanh form; an activation lansbert does not
# compute is refused by name.
cp -r "$tmp/tanh-hf" "$tmp/fast-hf" && sed -i 's/"gelu_new"/"gelu_fast"/' "$tmp/fast-hf/config.json"
"$lb" train --config "$tmp/good.yaml" --set model.hidden_act=gelu_tanh --set "checkpoint.dir=$tmp/from-fast-hf" \
  --init-from "$tmp/fast-hf" --stop-at-step 1 >/dev/null 2>&1 || { echo "FAIL: gelu_tanh from gelu_fast weights"; fail=1; }
cp -r "$tmp/tanh-hf" "$tmp/relu-hf" && sed -i 's/"gelu_new"/"relu"/' "$tmp/relu-hf/config.json"
expect_error 2 "relu-hf/config.json: field 'hidden_act': 'relu': lansbert computes GELU" \
  train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/from-relu-hf" --init-from "$tmp/relu-hf" --stop-at-step 1
# A checkpoint written before model.hidden_act existed (no such key, and no checksum yet, as
# then) resumes as the erf GELU it was trained with, and only as that.
mkdir -p "$tmp/pre-act" && cp -r "$tmp/ckpt/step-000000002" "$tmp/pre-act/" &&
python3 - "$tmp/pre-act/step-000000002/trainer.json" <<'PY' || { echo "FAIL: making a pre-hidden_act checkpoint"; fail=1; }
import json, sys
j = json.load(open(sys.argv[1]))
del j["config"]["model"]["hidden_act"], j["checksum"]
open(sys.argv[1], "w").write(json.dumps(j, indent=2) + "\n")
PY
"$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/pre-act" --resume "$tmp/pre-act/step-000000002" \
  --stop-at-step 3 >/dev/null 2>&1 || { echo "FAIL: a checkpoint without model.hidden_act did not resume"; fail=1; }
expect_error 2 "incompatible checkpoint" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/pre-act" \
  --set model.hidden_act=gelu_tanh --resume "$tmp/pre-act/step-000000002" --stop-at-step 3

# precision.attention flash on the CPU (the flash attention's twin, any head size): the same
# training as the hand-written attention (fp32: the same function with the same dropout masks).
step4() {
  "$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/att-$1" --set logging.every_steps=2 \
    --set precision.attention=$1 --stop-at-step 4 2>&1 | grep -o "step 4/400 | loss [0-9.]* | mlm_acc [0-9.]* | nsp_acc [0-9.]* | lr [0-9.e+-]* | gnorm [0-9.]*"
}
native4=$(step4 native) flash4=$(step4 flash)
[[ -n $native4 && $flash4 == "$native4" ]] || { echo "FAIL: flash training '$flash4' vs native '$native4'"; fail=1; }

# data.packing: the same micro-batches in fewer rows. Without dropout (whose masks follow the
# positions) the same training to rounding; the rows hold more tokens (fill).
pack4() {
  "$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/pack-$1" --set logging.every_steps=2 \
    --set model.hidden_dropout=0 --set model.attention_dropout=0 --set data.packing=$1 --stop-at-step 4 2>&1 |
    tee "$tmp/pack-$1.log" | grep -o "step 4/400 | loss [0-9.]*"
}
unpacked4=$(pack4 false) packed4=$(pack4 true)
python3 -c 'import sys; a, b = (float(x.split()[-1]) for x in sys.argv[1:]); sys.exit(not abs(a - b) < 1e-5 * b)' \
  "$packed4" "$unpacked4" || { echo "FAIL: packed training '$packed4' vs unpacked '$unpacked4'"; fail=1; }
grep -q "^model: .*; micro-batch 16 x 32 packed, 2 per update;" "$tmp/pack-true.log" ||
  { echo "FAIL: the model line of a packed run: $(grep '^model:' "$tmp/pack-true.log")"; fail=1; }
python3 - "$tmp/pack-false/metrics.jsonl" "$tmp/pack-true/metrics.jsonl" <<'PY' || fail=1
import json, sys
plain, packed = ([json.loads(l) for l in open(p)][-1] for p in sys.argv[1:])
print(f"packing: fill {plain['fill']:.3f} -> {packed['fill']:.3f}, seq/s {plain['seq_per_s']:.0f} -> {packed['seq_per_s']:.0f}")
# The same sequences and tokens: fill is tokens over the positions computed, so it rises by the
# ratio of the rows; tokens_per_s counts positions computed, seq_per_s sequences.
if not packed["fill"] > plain["fill"] * 1.05:
    sys.exit(f"FAIL: packing did not raise the fill: {plain['fill']} -> {packed['fill']}")
ratio = lambda r: r["tokens_per_s"] / r["seq_per_s"] / 32  # rows per sequence
if not (abs(ratio(plain) - 1) < 1e-6 and abs(ratio(packed) - plain["fill"] / packed["fill"]) < 1e-6):
    sys.exit(f"FAIL: positions per sequence: {ratio(plain)}, {ratio(packed)} (want 1 and {plain['fill'] / packed['fill']})")
PY
# precision.activations 16bit (emulated bf16 GEMMs): trains, and its loss stays within the
# rounding of the fp32-stored FFN's (that the bits differ: tests/model/half_activations_test.cc).
ffn4() {
  "$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/ffn-$1" --set logging.every_steps=2 \
    --set precision.dtype=bf16 --set precision.activations=$1 --stop-at-step 4 2>&1 | tee "$tmp/ffn-$1.log" |
    grep -o "step 4/400 | loss [0-9.]*"
}
ffn32=$(ffn4 fp32) ffn16=$(ffn4 16bit)
# The start-up line that says what decides the numerics.
grep -q "^model: .*; bf16 GEMMs, attention native, activations 16bit, hidden_act gelu, recompute none$" \
  "$tmp/ffn-16bit.log" || { echo "FAIL: the model line: $(grep '^model:' "$tmp/ffn-16bit.log")"; fail=1; }
python3 -c 'import sys; a, b = (float(x.split()[-1]) for x in sys.argv[1:]); sys.exit(not abs(a - b) < 1e-2 * b)' \
  "$ffn16" "$ffn32" || { echo "FAIL: 16-bit FFN activations '$ffn16' vs fp32-stored '$ffn32'"; fail=1; }

# A real SIGTERM: the run finishes its step, checkpoints and exits 0.
"$lb" train --config "$tmp/good.yaml" --resume latest > "$tmp/sigterm.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "step 50/" "$tmp/sigterm.log" 2>/dev/null && break; sleep 0.1; done
kill -TERM $pid; wait $pid; rc=$?
if [[ $rc != 0 ]] || ! grep -q "stopped by SIGTERM" "$tmp/sigterm.log"; then
  echo "FAIL: SIGTERM rc=$rc"; cat "$tmp/sigterm.log"; fail=1
fi
"$lb" export --checkpoint "$tmp/ckpt" --out "$tmp/hf" >/dev/null || { echo "FAIL: export"; fail=1; }
expect_error 2 "not empty" export --checkpoint "$tmp/ckpt" --out "$tmp/hf"
expect_error 2 "--out: an empty path" export --checkpoint "$tmp/ckpt" --out ''
# Not even --force writes over a checkpoint (its own, here through `latest`).
before_export=$(md5sum "$tmp/ckpt/latest/"*)
expect_error 2 "--out $tmp/ckpt/latest: a lansbert checkpoint (it holds trainer.json), which export never writes into" \
  export --checkpoint "$tmp/ckpt" --out "$tmp/ckpt/latest" --force
expect_error 2 "--out $tmp/ckpt: a checkpoint.dir (it holds a run's step-* checkpoints), which export never writes into" \
  export --checkpoint "$tmp/ckpt" --out "$tmp/ckpt" --force
expect_error 2 "--out $tmp/ckpt/latest: a lansbert checkpoint" export --checkpoint "$tmp/ckpt" --out "$tmp/ckpt/latest"
[[ $(md5sum "$tmp/ckpt/latest/"*) == "$before_export" ]] || { echo "FAIL: export --force wrote into a checkpoint"; fail=1; }
expect_error 2 "--out: $tmp/good.yaml/hf: cannot be created, $tmp/good.yaml is not a directory" \
  export --checkpoint "$tmp/ckpt" --out "$tmp/good.yaml/hf"
# A Hugging Face directory starts a phase with weights only; keep_moments cannot apply, and
# the run says so.
"$lb" train --config "$tmp/good.yaml" --init-from "$tmp/hf" --set "checkpoint.dir=$tmp/from-hf" --stop-at-step 1 \
  > "$tmp/from-hf.log" 2>&1 || { echo "FAIL: --init-from a Hugging Face directory"; fail=1; }
grep -q "holds weights only: the optimizer starts fresh" "$tmp/from-hf.log" ||
  { echo "FAIL: no note on keep_moments with a Hugging Face directory: $(cat "$tmp/from-hf.log")"; fail=1; }
# Each training record carries the trust ratios of its window's last applied update: LANS
# both of its directions', LAMB its one, named by tensor; a window whose last step the fp16
# loss scaler skipped reports the step before, and one whose every step it skipped none.
"$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/tr-lans" --set logging.every_steps=1 \
  --stop-at-step 2 >/dev/null 2>&1 || { echo "FAIL: the LANS metrics run"; fail=1; }
"$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/tr-lamb" --set optimizer.name=lamb \
  --set logging.every_steps=1 --stop-at-step 2 >/dev/null 2>&1 || { echo "FAIL: the LAMB metrics run"; fail=1; }
"$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/tr-fp16" --set precision.dtype=fp16 \
  --set precision.initial_scale=1e6 --set precision.growth_interval=1 --set logging.every_steps=2 \
  --stop-at-step 8 >/dev/null 2>&1 || { echo "FAIL: the fp16 metrics run"; fail=1; }
python3 - "$tmp" <<'PY' || { echo "FAIL: trust ratios in the metrics"; fail=1; }
import json, sys
tmp = sys.argv[1]
def records(run):
    return [r for r in map(json.loads, open(f"{tmp}/{run}/metrics.jsonl")) if "type" not in r]
def summary_ok(t):
    return t["min"] <= t["median"] <= t["max"] and t["min_tensor"].startswith(("bert.", "cls."))
ok = len(records("tr-lans")) == 2 and len(records("tr-lamb")) == 2  # a record per step
for r in records("tr-lans"):
    ok &= summary_ok(r["trust_ratio"]) and summary_ok(r["trust_ratio_grad"])
    ok &= 0 < r["fill"] <= 1  # the share of sequence positions that hold tokens
for r in records("tr-lamb"):
    ok &= summary_ok(r["trust_ratio"]) and "trust_ratio_grad" not in r
    ok &= "LayerNorm" not in r["trust_ratio"]["min_tensor"] + r["trust_ratio"]["max_tensor"]  # apex: none there
skipped, seen_last_skipped, seen_all_skipped = 0, False, False
for r in records("tr-fp16"):
    in_window = r["skipped"] - skipped
    skipped = r["skipped"]
    if in_window == 2:  # both steps of the window skipped: no update to report
        ok &= "trust_ratio" not in r
        seen_all_skipped = True
    elif r["lr"] == 0:  # the last step skipped, the one before applied
        ok &= summary_ok(r["trust_ratio"])
        seen_last_skipped = True
    else:
        ok &= summary_ok(r["trust_ratio"])
ok &= seen_last_skipped and seen_all_skipped  # the run must show both cases
sys.exit(0 if ok else 1)
PY
# A Hugging Face directory's config.json must describe the run's model: the heads, which no
# tensor's shape shows, and every size, are named before any weight is read.
expect_error 2 "--init-from $tmp/hf/config.json: num_attention_heads is 2 but the config sets model.heads: 4" \
  train --config "$tmp/good.yaml" --init-from "$tmp/hf" --set model.heads=4 --set "checkpoint.dir=$tmp/from-hf4"
expect_error 2 "--init-from $tmp/hf/config.json: num_hidden_layers is 2 but the config sets model.layers: 3" \
  train --config "$tmp/good.yaml" --init-from "$tmp/hf" --set model.layers=3 --set "checkpoint.dir=$tmp/from-hf4"
# SIGKILL while a checkpoint is being written (the test hook holds the run after the new
# checkpoint's files are complete but before its rename): `latest` still names the previous
# checkpoint, which loads and resumes.
prev=$(readlink "$tmp/ckpt/latest")
step_now=$(/usr/bin/python3 -c "import json; print(json.load(open('$tmp/ckpt/$prev/trainer.json'))['step'])" 2>/dev/null || echo 0)
LANSBERT_TEST_CHECKPOINT_SLEEP=60 "$lb" train --config "$tmp/good.yaml" --resume latest \
  --stop-at-step $((step_now + 2)) > "$tmp/sigkill.log" 2>&1 &
pid=$!
for _ in $(seq 300); do compgen -G "$tmp/ckpt/.tmp-*/trainer.json" >/dev/null && break; sleep 0.1; done
compgen -G "$tmp/ckpt/.tmp-*/trainer.json" >/dev/null || { echo "FAIL: no checkpoint write to interrupt"; fail=1; }
kill -KILL $pid; wait $pid 2>/dev/null
[[ $(readlink "$tmp/ckpt/latest") == "$prev" ]] || { echo "FAIL: SIGKILL mid-write moved latest"; fail=1; }
"$lb" eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs" --max-sequences 32 > /dev/null \
  || { echo "FAIL: previous checkpoint not loadable after SIGKILL"; fail=1; }
"$lb" train --config "$tmp/good.yaml" --resume latest --stop-at-step $((step_now + 1)) > "$tmp/resume.log" 2>&1 \
  || { echo "FAIL: resume after SIGKILL"; cat "$tmp/resume.log"; fail=1; }

# Resuming an older checkpoint while later ones exist would replace them: refused.
oldest=$(cd "$tmp/ckpt" && ls -d step-* | head -1)
if [[ $oldest != "$(readlink "$tmp/ckpt/latest")" ]]; then
  expect_error 2 "later than the resumed $oldest" train --config "$tmp/good.yaml" --resume "$tmp/ckpt/$oldest"
else
  echo "FAIL: expected more than one checkpoint in $tmp/ckpt"; fail=1
fi

# A resume past the end of the schedule; an edited trainer.json (its own checksum, last
# field); and, in a file without that field (older builds), counts out of range.
expect_error 2 "beyond schedule.total_steps 1 (raise schedule.total_steps" \
  train --config "$tmp/good.yaml" --resume latest --set schedule.total_steps=1
meta="$(readlink -f "$tmp/ckpt/latest")/trainer.json"
cp "$meta" "$tmp/trainer.json.orig"
sed -i 's/"step": [0-9]*/"step": -5/' "$meta"
expect_error 4 "trainer.json: checksum mismatch" train --config "$tmp/good.yaml" --resume latest
sed -z -i 's/,\n  "checksum": "crc32c:[0-9a-f]*"\n}/\n}/' "$meta"
expect_error 4 "trainer.json: step = -5, expected at least 0" train --config "$tmp/good.yaml" --resume latest
# Sections a resume or --init-from compares that are not objects (they once ended in an
# uncaught JSON exception): the file's error, before anything is loaded.
edit_meta() {  # python expression on j
  /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); j.pop('checksum',None); $1; json.dump(j,open(sys.argv[1],'w'),indent=2)" "$meta"
}
# refused EDIT MESSAGE [init]: trainer.json edited by EDIT is refused with exit 4 and MESSAGE,
# by --resume latest or (init) by --init-from.
refused() {
  cp "$tmp/trainer.json.orig" "$meta"; edit_meta "$1"
  if [[ ${3:-} == init ]]; then
    expect_error 4 "$2" train --config "$tmp/good.yaml" --init-from "$(dirname "$meta")" --set "checkpoint.dir=$tmp/ckpt-init"
  else
    expect_error 4 "$2" train --config "$tmp/good.yaml" --resume latest
  fi
}
refused "j['config']=2" "trainer.json: config is not an object"
refused "j['config']['batch']='x'" "trainer.json: config.batch is not an object"
refused "del j['config']['batch']" "key 'batch' not found"
# A field of the wrong type or a missing one is named.
refused "j['step']='x'" "trainer.json: malformed field 'step': type must be number, but is string"
refused "del j['data']['consumed']" "trainer.json: malformed field 'data.consumed': key 'consumed' not found"
refused "j['config']['model']['hidden_act']=3" "config.model.hidden_act is not a string" init
# Fields only a resume's notes or --init-from's vocabulary check read (a wrong type once ended
# in an uncaught JSON exception, exit 70, or, for vocab_hash, skipped the check): named as
# this file's error.
refused "j['config']['batch']['micro_batch']='x'" "config.batch.micro_batch is not an integer"
refused "j['config']['data']=[1]" "config.data is not an object"
refused "j['train_data']['digest']='x'" "train_data.digest is not a count"
refused "j['train_data']['vocab_hash']=7" "train_data.vocab_hash is not a string" init
cp "$tmp/trainer.json.orig" "$meta"

# A checkpoint write that fails (a full disk, here a 400 KiB file size limit, so the 660 KiB
# optimizer.state write fails with EFBIG: lansbert ignores SIGXFSZ itself, no trap here):
# exit 5 naming the file, and the partial temporary directory is removed (its space given back).
(ulimit -f 400; exec "$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/ckpt-full" \
  --stop-at-step 1) > "$tmp/full.log" 2>&1
rc=$?
[[ $rc == 5 ]] && grep -q "optimizer.state.tmp: write failed: File too large" "$tmp/full.log" ||
  { echo "FAIL: a failed checkpoint write -> rc $rc: $(tail -2 "$tmp/full.log")"; fail=1; }
compgen -G "$tmp/ckpt-full/.tmp-*" > /dev/null && { echo "FAIL: a failed checkpoint write left $(ls -a "$tmp/ckpt-full")"; fail=1; }
# The same failure in the background (checkpoint.async): the run goes on until the write has
# ended, then stops with exit 5 naming the step whose checkpoint was not written.
(ulimit -f 400; exec "$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/ckpt-full-async" \
  --set checkpoint.async=true --set checkpoint.every_steps=1 --stop-at-step 20) > "$tmp/afull.log" 2>&1
rc=$?
[[ $rc == 5 ]] &&
  grep -q "checkpoint of step 1 not written in the background (no earlier one in this run): .*optimizer.state.tmp: write failed: File too large" "$tmp/afull.log" ||
  { echo "FAIL: a failed checkpoint write in the background -> rc $rc: $(tail -2 "$tmp/afull.log")"; fail=1; }
compgen -G "$tmp/ckpt-full-async/.tmp-*" > /dev/null && { echo "FAIL: a failed background write left $(ls -a "$tmp/ckpt-full-async")"; fail=1; }

# A metrics line that cannot be written (the same limit, 200 KiB, reached by the metrics file
# of a model whose checkpoint files stay under it) ends the run with exit 5, but after the
# step's checkpoint; the resumed run appends to the torn file on a line of its own.
small=(--set model.hidden=32 --set model.layers=1 --set model.intermediate=64 --set schedule.total_steps=5000
       --set logging.every_steps=1 --set "checkpoint.dir=$tmp/ckpt-metrics")
(ulimit -f 200; exec "$lb" train --config "$tmp/good.yaml" "${small[@]}") > "$tmp/mfull.log" 2>&1
rc=$?
stopped=$(sed -n 's/.*metrics.jsonl: write failed: File too large; the run stopped after step \([0-9]*\) with its checkpoint written.*/\1/p' "$tmp/mfull.log")
[[ $rc == 5 && -n $stopped && -d $tmp/ckpt-metrics/step-$(printf %09d "${stopped:-0}") ]] ||
  { echo "FAIL: a failed metrics write -> rc $rc: $(tail -1 "$tmp/mfull.log")"; fail=1; }
"$lb" train --config "$tmp/good.yaml" "${small[@]}" --resume latest --stop-at-step $((stopped + 2)) > /dev/null 2>&1 ||
  { echo "FAIL: resuming after a failed metrics write"; fail=1; }
python3 - "$tmp/ckpt-metrics/metrics.jsonl" "$stopped" <<'PY' || { echo "FAIL: the metrics file after the resume"; fail=1; }
import json, sys
bad, steps = [], []
for n, line in enumerate(open(sys.argv[1]), 1):
    try:
        steps.append(json.loads(line)["step"])
    except ValueError:
        bad.append(n)
stopped = int(sys.argv[2])
assert len(bad) == 1, f"unreadable lines {bad}"
assert steps[-2:] == [stopped + 1, stopped + 2], steps[-4:]
PY

# A data.train record that cannot be read mid-run (a flipped byte in the middle of the
# shard, found when the sampler reaches it) ends the run with exit 4 naming the record, after
# the last completed step's checkpoint; with the shard mended the run continues from there
# exactly as one that never stopped.
mkdir -p "$tmp/rot" && cp "$tmp/data/shards/"*.lbs "$tmp/rot/"
rotten=$(ls "$tmp/rot/"*.lbs | head -1)
printf '\x01' | dd of="$rotten" bs=1 seek=$(( $(stat -c %s "$rotten") / 2 )) conv=notrunc 2>/dev/null
"$lb" train --config "$tmp/good.yaml" "${small[@]}" --set "checkpoint.dir=$tmp/ckpt-rot" --set "data.train=$tmp/rot/*.lbs" \
  --set logging.metrics_file=- > "$tmp/rot.log" 2>&1
rc=$?
stopped=$(sed -n 's/.*record [0-9]* (byte offsets .*checksum mismatch.*the run stopped after step \([0-9]*\) with its checkpoint written.*/\1/p' "$tmp/rot.log")
if [[ $rc != 4 || -z $stopped ]]; then
  echo "FAIL: an unreadable data.train record mid-run -> rc $rc: $(tail -1 "$tmp/rot.log")"; fail=1
else
  "$lb" train --config "$tmp/good.yaml" "${small[@]}" --set "checkpoint.dir=$tmp/ckpt-rot" --set logging.metrics_file=- \
    --resume latest --stop-at-step $((stopped + 3)) > /dev/null 2>&1 || { echo "FAIL: resuming with the shard mended"; fail=1; }
  "$lb" train --config "$tmp/good.yaml" "${small[@]}" --set "checkpoint.dir=$tmp/ckpt-straight" --set logging.metrics_file=- \
    --stop-at-step $((stopped + 3)) > /dev/null 2>&1 || { echo "FAIL: the uninterrupted run"; fail=1; }
  step_dir=step-$(printf %09d $((stopped + 3)))
  cmp -s "$tmp/ckpt-rot/$step_dir/model.safetensors" "$tmp/ckpt-straight/$step_dir/model.safetensors" ||
    { echo "FAIL: stopped at an unreadable record and resumed, the weights differ from an uninterrupted run's"; fail=1; }
fi

# A resume over other data.train than the checkpoint's run read says so (the position then
# indexes another order: the run is no longer the uninterrupted one); the same shards moved
# to another directory are the same data and resume without a note.
mkdir -p "$tmp/moved" "$tmp/more" && cp "$tmp/data/shards/"*.lbs "$tmp/moved/" &&
  for c in a b; do cp "$(ls "$tmp/data/shards/"*.lbs | head -1)" "$tmp/more/$c.lbs"; done
resume_straight() {  # DATA_GLOB LOG: one more step of ckpt-straight over DATA_GLOB
  local at; at=$(sed -n 's/^ *"step": \([0-9]*\),*$/\1/p' "$tmp/ckpt-straight/latest/trainer.json" | head -1)
  "$lb" train --config "$tmp/good.yaml" "${small[@]}" --set "checkpoint.dir=$tmp/ckpt-straight" --set logging.metrics_file=- \
    --set "data.train=$1" --resume latest --stop-at-step $((at + 1)) > "$2" 2>&1 || { echo "FAIL: resume over $1"; fail=1; }
}
resume_straight "$tmp/moved/*.lbs" "$tmp/moved.log"
grep -q "^resuming from" "$tmp/moved.log" && ! grep -q "note: data.train" "$tmp/moved.log" ||
  { echo "FAIL: resuming over moved shards: $(cat "$tmp/moved.log")"; fail=1; }
resume_straight "$tmp/more/*.lbs" "$tmp/more.log"
grep -q "note: data.train is not the data the checkpoint's run read (it read [0-9]* samples in 1 file, .*; now [0-9]* samples in 2 files" \
  "$tmp/more.log" || { echo "FAIL: resuming over more shards is not said: $(cat "$tmp/more.log")"; fail=1; }
# Another seed on resume is allowed, and said: it changes the dropout masks and the sample order.
cp -r "$tmp/ckpt-straight" "$tmp/ckpt-seed"
at=$(sed -n 's/^ *"step": \([0-9]*\),*$/\1/p' "$tmp/ckpt-seed/latest/trainer.json" | head -1)
"$lb" train --config "$tmp/good.yaml" "${small[@]}" --set "checkpoint.dir=$tmp/ckpt-seed" --set logging.metrics_file=- \
  --set "data.train=$tmp/moved/*.lbs" --set seed=5 --resume latest --stop-at-step $((at + 1)) > "$tmp/seed.log" 2>&1 ||
  { echo "FAIL: resume with another seed: $(cat "$tmp/seed.log")"; fail=1; }
grep -q "^note: seed 5 is not the checkpoint's [0-9]*: the dropout masks and the sample order" "$tmp/seed.log" ||
  { echo "FAIL: resuming with another seed is not said: $(cat "$tmp/seed.log")"; fail=1; }

# A diverged run exits 7 (a job script must not just retry it). Non-finite gradients past
# precision.max_consecutive_skips name the step; an update that wrote non-finite weights (a
# learning rate beyond float's range) is caught at the checkpoint, which is not written, so
# `latest` never holds them.
div=(--set schedule.total_steps=50 --set checkpoint.every_steps=2 --set precision.max_consecutive_skips=2)
expect_error 7 "diverged: step 4: gradients were not finite without loss scaling for 2 steps in a row" \
  train --config "$tmp/good.yaml" "${small[@]}" "${div[@]}" --set "checkpoint.dir=$tmp/ckpt-div" --set optimizer.lr=1e30
[[ -d $tmp/ckpt-div/step-000000002 ]] || { echo "FAIL: the diverging run's step-2 checkpoint is missing"; fail=1; }
[[ $last_err == *"resume from the newest checkpoint (--resume $tmp/ckpt-div/step-000000002) with a lower optimizer.lr"* ]] ||
  { echo "FAIL: the diverged run does not name its newest checkpoint: $last_err"; fail=1; }
expect_error 7 "diverged: checkpoint of step 2 not written (no earlier one in this run): " \
  train --config "$tmp/good.yaml" "${small[@]}" "${div[@]}" --set "checkpoint.dir=$tmp/ckpt-inf" --set optimizer.lr=1e39
"$lb" train --config "$tmp/good.yaml" "${small[@]}" "${div[@]}" --set "checkpoint.dir=$tmp/ckpt-inf2" --set optimizer.lr=1e39 \
  > "$tmp/inf.log" 2>&1
[[ $? == 7 ]] || { echo "FAIL: the run of non-finite weights did not exit 7"; fail=1; }
grep -q "weights of bert\..* (the first tensor holding any) are not finite" "$tmp/inf.log" ||
  { echo "FAIL: the non-finite tensor is not named: $(tail -1 "$tmp/inf.log")"; fail=1; }
[[ ! -e $tmp/ckpt-inf/latest && -z $(ls -d "$tmp/ckpt-inf/step-"* 2>/dev/null) ]] ||
  { echo "FAIL: a checkpoint of non-finite weights was written"; fail=1; }

# Room for the checkpoints: a keep_last no disk holds is warned of at start-up and by the dry
# run, whose plan gives a checkpoint's size; a run with room says nothing of it.
room=(--set "checkpoint.dir=$tmp/ckpt-room" --set checkpoint.keep_last=2000000000)
"$lb" train --config "$tmp/good.yaml" "${small[@]}" "${room[@]}" --stop-at-step 1 > "$tmp/room.log" 2>&1 &&
  grep -q "^warning: checkpoint.dir $tmp/ckpt-room: [0-9.]* GB free on its file system, and a checkpoint of this run takes about [0-9]* bytes; keeping checkpoint.keep_last 2000000000 of them needs up to" \
    "$tmp/room.log" || { echo "FAIL: no warning of the room for checkpoints: $(cat "$tmp/room.log")"; fail=1; }
"$lb" train --config "$tmp/good.yaml" "${small[@]}" "${room[@]}" --dry-run > "$tmp/room-plan.log" 2>&1 &&
  grep -q "^  checkpoint size     : about [0-9]* bytes (weights [0-9]* bytes, moments [0-9]* bytes); [0-9.]* GB free there$" "$tmp/room-plan.log" &&
  grep -q "^  WARNING             : checkpoint.dir $tmp/ckpt-room: .*keep_last 2000000000" "$tmp/room-plan.log" ||
  { echo "FAIL: the dry run's checkpoint lines: $(grep -i checkpoint "$tmp/room-plan.log")"; fail=1; }
grep -q "warning: checkpoint.dir" "$tmp/moved.log" && { echo "FAIL: a warning of room where there is room"; fail=1; }

# Damaged moments: eval reads only the weights and works; a resume, which loads the moments,
# is a clear error naming the file (exit 4).
state=$(readlink -f "$tmp/ckpt-straight/latest")/optimizer.state
printf '\x01' | dd of="$state" bs=1 seek=$(( $(stat -c %s "$state") - 1 )) conv=notrunc 2>/dev/null
"$lb" eval --checkpoint "$tmp/ckpt-straight" --data "$tmp/data/shards/*.lbs" > "$tmp/eval-moments.log" 2>&1 &&
  grep -q "^mlm_loss" "$tmp/eval-moments.log" || { echo "FAIL: eval with damaged moments: $(cat "$tmp/eval-moments.log")"; fail=1; }
expect_error 4 "$state: size or CRC32C differs" train --config "$tmp/good.yaml" "${small[@]}" \
  --set "checkpoint.dir=$tmp/ckpt-straight" --set logging.metrics_file=- --resume latest
# lansbert verify checks every file: the damage is found, in the one checkpoint that has it.
expect_error 4 "$state: size or CRC32C differs" verify --checkpoint "$tmp/ckpt-straight"
verify_out=$("$lb" verify --checkpoint "$tmp/ckpt-straight" 2>/dev/null)  # exit 4, checked above
grep -q "^damaged .*: .*$state: size or CRC32C differs" <<< "$verify_out" ||
  { echo "FAIL: verify of one damaged checkpoint prints no 'damaged' line: $verify_out"; fail=1; }
"$lb" verify --checkpoint "$tmp/ckpt-straight" --all > "$tmp/verify.log" 2> "$tmp/verify.err"
rc=$?
bad_step=$tmp/ckpt-straight/$(basename "${state%/*}")  # as --all names it (not through readlink)
[[ $rc == 4 && $(grep -c "^ok $tmp/ckpt-straight/step-[0-9]*: step [0-9]* of a 1-rank run, 2 files of [0-9]* bytes checked (replicated optimizer state)$" "$tmp/verify.log") -ge 1 &&
   $(grep -c "^damaged " "$tmp/verify.log") == 1 && $(grep -c "^damaged $bad_step: $bad_step/optimizer.state: size or CRC32C differs" "$tmp/verify.log") == 1 ]] &&
  grep -q "1 of [0-9]* checkpoints in $tmp/ckpt-straight are damaged" "$tmp/verify.err" ||
  { echo "FAIL: verify --all -> rc $rc: $(cat "$tmp/verify.log" "$tmp/verify.err")"; fail=1; }
# A checkpoint that a running training prunes while verify --all reads the directory is
# "gone", not damaged: here its trainer.json is a FIFO, whose open waits until the directory
# has been removed and a writer opens the FIFO through a link outside it.
mkdir -p "$tmp/vgone/step-000000099" && cp -r "$(ls -d "$tmp/ckpt-straight/step-"* | head -1)" "$tmp/vgone/" &&
  mkfifo "$tmp/vgone/step-000000099/trainer.json" && ln "$tmp/vgone/step-000000099/trainer.json" "$tmp/vgone-fifo"
"$lb" verify --checkpoint "$tmp/vgone" --all > "$tmp/vgone.log" 2>&1 &
verifier=$!
sleep 1
rm -rf "$tmp/vgone/step-000000099"
timeout 10 bash -c "exec 3> '$tmp/vgone-fifo'"
wait $verifier
rc=$?
[[ $rc == 0 && $(grep -c "^ok $tmp/vgone/step-" "$tmp/vgone.log") == 1 ]] &&
  grep -q "^gone $tmp/vgone/step-000000099: removed while verify ran" "$tmp/vgone.log" ||
  { echo "FAIL: verify --all with a checkpoint pruned meanwhile -> rc $rc: $(cat "$tmp/vgone.log")"; fail=1; }

# Corrupt checkpoint: a flipped byte is a clear error (exit 4).
latest=$(readlink -f "$tmp/ckpt/latest")
printf '\x01' | dd of="$latest/model.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
expect_error 4 "model.safetensors" eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs"
(( fail )) && exit 1
echo "train cli: ok"
