#!/usr/bin/env bash
# `lansbert eval` (and export's path handling) from the command line: a checkpoint's numbers
# with --dump-batch, on the run's own data.eval with relative paths, packed as the run packed
# or not, as one JSON line with --json; a Hugging Face directory gives its checkpoint's own
# numbers; data the model cannot take and directories of neither kind are refused by name.
# Usage: eval_cli_test.sh LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH
source "$(dirname "$0")/train_test_setup.sh" "$@"
write_tiny_yaml "$tmp/good.yaml"
# A checkpoint (4 steps), its Hugging Face export, and a packed run's checkpoint without dropout.
"$lb" train --config "$tmp/good.yaml" --stop-at-step 4 >/dev/null 2>&1 || { echo "FAIL: the run to evaluate"; fail=1; }
"$lb" export --checkpoint "$tmp/ckpt" --out "$tmp/hf" >/dev/null || { echo "FAIL: export"; fail=1; }
"$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/pack-true" --set model.hidden_dropout=0 \
  --set model.attention_dropout=0 --set data.packing=true --stop-at-step 4 >/dev/null 2>&1 ||
  { echo "FAIL: the packed run to evaluate"; fail=1; }

"$lb" eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs" --max-sequences 64 \
  --dump-batch "$tmp/batch.json" > "$tmp/eval.log" || { echo "FAIL: eval"; fail=1; }
grep -q "mlm_loss" "$tmp/eval.log" || { echo "FAIL: eval output"; fail=1; }
# It writes a new file or replaces an earlier dump (the same command again); anything else that
# exists (a shard named by mistake) is refused, unchanged.
"$lb" eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs" --max-sequences 64 \
  --dump-batch "$tmp/batch.json" > /dev/null || { echo "FAIL: eval --dump-batch over an earlier dump"; fail=1; }
shard=$(ls "$tmp/data/shards/"*.lbs | head -1)
sum=$(md5sum < "$shard")
expect_error 2 "--dump-batch: $shard exists and is not an earlier dump" \
  eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs" --max-sequences 16 --dump-batch "$shard"
[[ $(md5sum < "$shard") == "$sum" ]] || { echo "FAIL: eval --dump-batch wrote over a shard"; fail=1; }
expect_error 2 "--dump-batch: $tmp/good.yaml/b.json: cannot be created" \
  eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs" --dump-batch "$tmp/good.yaml/b.json"
"$lb" eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs" --max-sequences 16 \
  --dump-batch "$tmp/dumps/new/batch.json" > /dev/null && cmp -s "$tmp/batch.json" "$tmp/dumps/new/batch.json" ||
  { echo "FAIL: eval --dump-batch into a new directory"; fail=1; }
# eval checks its data against the checkpoint's model as train does (here: sequences longer
# than max_positions 64) instead of tripping an internal check.
"$mk" "$tmp/data128" 128 20 >/dev/null || { echo "FAIL: make data128"; fail=1; }
expect_error 2 "eval: the shards hold sequences of 128 tokens, more than the model's max_positions 64" \
  eval --checkpoint "$tmp/ckpt" --data "$tmp/data128/shards/*.lbs"
expect_error 2 "--max-sequences must be positive" eval --checkpoint "$tmp/ckpt" --data "$tmp/data/shards/*.lbs" \
  --max-sequences 0
# Paths in a run's config are as training saw them. Plain `eval` uses the run's data.eval,
# evaluation.max_sequences and micro-batch (the numbers training logged); from elsewhere a
# relative path is not found, and the message says which flag to pass.
cat > "$tmp/rel.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["data/shards/*.lbs"], eval: ["data/shards/*.lbs"], vocab: data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 16}
schedule: {total_steps: 2}
checkpoint: {dir: relck, every_steps: 0}
evaluation: {max_sequences: 48}
YAML
(cd "$tmp" && "$lb" train --config rel.yaml > rel-train.log 2>&1) || { echo "FAIL: relative-path run"; fail=1; }
(cd "$tmp" && "$lb" eval --checkpoint relck > rel-eval.log 2>&1) || { echo "FAIL: plain eval"; fail=1; }
grep -q "^sequences 48," "$tmp/rel-eval.log" || { echo "FAIL: plain eval: $(cat "$tmp/rel-eval.log")"; fail=1; }
(cd / && fail=0 && expect_error 3 "pass --data" eval --checkpoint "$tmp/relck" &&
  expect_error 3 "pass --vocab" export --checkpoint "$tmp/relck" --out "$tmp/rel-hf" && exit $fail) || fail=1
# From elsewhere a relative data.vocab may name another file: one that does not load there is
# not checked; one of another vocabulary is named as read from the current directory.
mkdir -p "$tmp/elsewhere/data" && : > "$tmp/elsewhere/data/vocab.txt"
(cd "$tmp/elsewhere" && "$lb" eval --checkpoint "$tmp/relck" --data "$tmp/data/shards/*.lbs" --max-sequences 16 \
  > /dev/null 2>&1) || { echo "FAIL: eval from a directory whose data/vocab.txt is empty"; fail=1; }
cp "$tmp/data/vocab.txt" "$tmp/elsewhere/data/vocab.txt" && echo "extra" >> "$tmp/elsewhere/data/vocab.txt"
(cd "$tmp/elsewhere" && fail=0 && expect_error 2 \
  "the checkpoint's data.vocab data/vocab.txt (a relative path, read from the current directory) has hash" \
  eval --checkpoint "$tmp/relck" --data "$tmp/data/shards/*.lbs" && exit $fail) || fail=1
# eval packs as the run did (its first line says so), or not with --packing off or --dump-batch
# (whose rows other tools read): the same numbers to rounding.
evalpk() {
  "$lb" eval --checkpoint "$tmp/pack-true" --data "$tmp/data/shards/*.lbs" --max-sequences 48 "$@" 2>&1
}
ev_packed=$(evalpk) || { echo "FAIL: packed eval: $ev_packed"; fail=1; }
ev_plain=$(evalpk --packing off) || { echo "FAIL: eval --packing off: $ev_plain"; fail=1; }
ev_dump=$(evalpk --dump-batch "$tmp/pk-batch.json") || { echo "FAIL: eval --dump-batch: $ev_dump"; fail=1; }
[[ $(head -1 <<< "$ev_packed") == *"(cpu backend, fp32 GEMMs, packed)" &&
   $(head -1 <<< "$ev_plain") == "checkpoint "*"(cpu backend, fp32 GEMMs)" &&
   $(head -1 <<< "$ev_dump") == "checkpoint "*"(cpu backend, fp32 GEMMs)" && -s $tmp/pk-batch.json &&
   $(tail -n +2 <<< "$ev_dump") == "$(tail -n +2 <<< "$ev_plain")" ]] ||
  { echo "FAIL: eval packing lines: $ev_packed / $ev_plain / $ev_dump"; fail=1; }
python3 - "$ev_packed" "$ev_plain" <<'PY' || fail=1
import re, sys
a, b = ([float(x) for x in re.findall(r"(?:loss|accuracy) ([0-9.]+)", t)] for t in sys.argv[1:])
if len(a) != 5 or len(b) != 5 or any(abs(x - y) > 2e-5 * max(1, abs(y)) for x, y in zip(a, b)):
    sys.exit(f"FAIL: packed eval {a} vs unpacked {b}")
# The same 48 sequences: in fewer rows packed, one row each unpacked.
(pr,), (ur,) = (re.findall(r"^sequences 48, rows ([0-9]+),", t, re.M) for t in sys.argv[1:])
if not (int(ur) == 48 and 0 < int(pr) < 48):
    sys.exit(f"FAIL: eval rows packed {pr}, unpacked {ur}")
PY
# --json: the same evaluation as one line on stdout, for scripts; the checkpoint's step with it.
ev_json=$("$lb" eval --checkpoint "$tmp/pack-true" --data "$tmp/data/shards/*.lbs" --max-sequences 48 --json 2>/dev/null)
python3 - "$ev_json" "$ev_packed" <<'PY' || fail=1
import json, re, sys
j, text = json.loads(sys.argv[1]), sys.argv[2]
# The text prints the losses with 6 decimals, the accuracies with 4: the JSON rounds to them.
want = dict(re.findall(r"\b(mlm_loss|mlm_accuracy|nsp_loss|nsp_accuracy) ([0-9.]+)", text))
rows = int(re.search(r"^sequences 48, rows ([0-9]+),", text, re.M).group(1))
bad = [k for k, v in want.items() if f"{j[k]:.{len(v.split('.')[1])}f}" != v]
if (bad or len(want) != 4 or j["step"] != 4 or j["packing"] is not True or j["hugging_face"] is not False
        or j["backend"] != "cpu" or j["ranks"] != 1 or j["sequences"] != 48 or j["rows"] != rows
        or abs(j["loss"] - j["mlm_loss"] - j["nsp_loss"]) > 1e-12):
    sys.exit(f"FAIL: eval --json {j} against the text {want}, rows {rows}: {bad}")
PY
# Named held-out sets: a run whose data.eval has two entries named by evaluation.names (given
# with --set) evaluates each apart; plain `eval` of its checkpoint prints the sums, then each
# set's lines, each set's numbers those of its entry alone (--data); --json carries them too.
# (Other documents than data's, so that a set reading another set's samples is seen.)
"$mk" "$tmp/other-data" 32 5 200 > /dev/null && mkdir -p "$tmp/other" && cp "$tmp/other-data/shards/"*.lbs "$tmp/other/" ||
  { echo "FAIL: make the other set"; fail=1; }
"$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/sets" --set "data.eval=[$tmp/data/shards/*.lbs, $tmp/other/*.lbs]" \
  --set "evaluation.names=[wiki, books]" --set evaluation.max_sequences=24 --stop-at-step 2 > "$tmp/sets-train.log" 2>&1 ||
  { echo "FAIL: the run with named sets: $(tail -3 "$tmp/sets-train.log")"; fail=1; }
"$lb" eval --checkpoint "$tmp/sets" > "$tmp/sets-eval.log" 2>&1 || { echo "FAIL: eval of named sets"; fail=1; }
grep -q "^sequences 48, " "$tmp/sets-eval.log" && grep -q "^wiki: sequences 24, " "$tmp/sets-eval.log" &&
  grep -q "^books: mlm_loss " "$tmp/sets-eval.log" || { echo "FAIL: eval of named sets: $(cat "$tmp/sets-eval.log")"; fail=1; }
"$lb" eval --checkpoint "$tmp/sets" --data "$tmp/other/*.lbs" --max-sequences 24 > "$tmp/books-alone.log" 2>&1
[[ "books: $(tail -1 "$tmp/books-alone.log")" == "$(tail -1 "$tmp/sets-eval.log")" ]] ||
  { echo "FAIL: set books is not its entry alone: $(tail -1 "$tmp/books-alone.log") vs $(tail -1 "$tmp/sets-eval.log")"; fail=1; }
sets_json=$("$lb" eval --checkpoint "$tmp/sets" --json 2>/dev/null)
python3 - "$sets_json" <<'PY' || fail=1
import json, sys
j = json.loads(sys.argv[1])
s = j.get("sets", {})
if list(s) != ["wiki", "books"] or any(v["sequences"] != 24 for v in s.values()) or j["sequences"] != 48 \
        or j["masked"] != s["wiki"]["masked"] + s["books"]["masked"]:
    sys.exit(f"FAIL: eval --json of named sets: {j}")
PY
"$lb" eval --checkpoint "$tmp/sets" --data "$tmp/data/shards/*.lbs" --max-sequences 24 > "$tmp/wiki-alone.log" 2>&1
[[ "wiki: $(tail -1 "$tmp/wiki-alone.log")" == "$(grep '^wiki: mlm_loss' "$tmp/sets-eval.log")" &&
   "$(tail -1 "$tmp/wiki-alone.log")" != "$(tail -1 "$tmp/books-alone.log")" ]] ||
  { echo "FAIL: set wiki is not its entry alone, or the two sets score alike"; fail=1; }
# Resumed without the names under a max_sequences, the sums read other samples: said.
"$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/sets" --set "data.eval=[$tmp/data/shards/*.lbs, $tmp/other/*.lbs]" \
  --set evaluation.max_sequences=24 --resume latest --stop-at-step 3 > "$tmp/sets-resume.log" 2>&1 &&
  grep -qF 'note: evaluation names none (checkpoint: ["wiki","books"]): the held-out sums from here read other samples' "$tmp/sets-resume.log" ||
  { echo "FAIL: no note when the names go: $(grep note "$tmp/sets-resume.log")"; fail=1; }
expect_error 2 "--names: 1 names for 2 --data entries (one each)" \
  eval --checkpoint "$tmp/sets" --data "$tmp/data/shards/*.lbs" --data "$tmp/other/*.lbs" --names wiki
expect_error 2 "eval: --names goes with --data" eval --checkpoint "$tmp/sets" --names a b
expect_error 2 "--names: 'wiki books' (entry 0): a name is 1 to 64 letters" \
  eval --checkpoint "$tmp/sets" --data "$tmp/other/*.lbs" --names "wiki books"
expect_error 2 "evaluation.names: 1 name for the 2 entries of data.eval (one each)" \
  train --config "$tmp/good.yaml" --set "data.eval=[$tmp/data/shards/*.lbs, $tmp/other/*.lbs]" --set evaluation.names=wiki
# eval takes a Hugging Face directory: the export of a checkpoint (fp32 weights) gives the
# checkpoint's own numbers. It names no held-out data; a directory of neither kind is refused.
"$lb" eval --checkpoint "$tmp/hf" --data "$tmp/data/shards/*.lbs" --max-sequences 48 > "$tmp/eval-hf.log" 2>&1 ||
  { echo "FAIL: eval of a Hugging Face directory: $(cat "$tmp/eval-hf.log")"; fail=1; }
"$lb" eval --checkpoint "$(readlink -f "$tmp/ckpt/latest")" --data "$tmp/data/shards/*.lbs" --max-sequences 48 \
  > "$tmp/eval-ck.log" 2>&1 || { echo "FAIL: eval of the exported checkpoint"; fail=1; }
[[ $(head -1 "$tmp/eval-hf.log") == "Hugging Face model $tmp/hf (cpu backend, fp32 GEMMs)" ]] ||
  { echo "FAIL: eval of a Hugging Face directory, first line: $(head -1 "$tmp/eval-hf.log")"; fail=1; }
[[ $(tail -2 "$tmp/eval-hf.log") == "$(tail -2 "$tmp/eval-ck.log")" && $(wc -l < "$tmp/eval-hf.log") == 3 ]] ||
  { echo "FAIL: the export's numbers differ from its checkpoint's:"; cat "$tmp/eval-hf.log" "$tmp/eval-ck.log"; fail=1; }
expect_error 2 "eval: $tmp/hf is a Hugging Face directory, which names no held-out data: pass --data" \
  eval --checkpoint "$tmp/hf"
expect_error 3 "$tmp/data: neither a checkpoint (trainer.json, or a 'latest' pointer) nor a Hugging Face directory" \
  eval --checkpoint "$tmp/data" --data "$tmp/data/shards/*.lbs"
mkdir -p "$tmp/pt-only" && cp "$tmp/hf/config.json" "$tmp/pt-only/" && : > "$tmp/pt-only/pytorch_model.bin"
expect_error 3 "pt-only: neither a checkpoint (trainer.json, or a 'latest' pointer) nor a Hugging Face directory (config.json and model.safetensors); it holds pytorch_model.bin, which lansbert does not read" \
  eval --checkpoint "$tmp/pt-only" --data "$tmp/data/shards/*.lbs"
expect_error 3 "--init-from $tmp/pt-only: neither a lansbert checkpoint nor a directory with model.safetensors; it holds pytorch_model.bin" \
  train --config "$tmp/good.yaml" --init-from "$tmp/pt-only" --set "checkpoint.dir=$tmp/from-pt"
# A Hugging Face directory whose model.safetensors lacks a tensor: --init-from names the tensor.
mkdir -p "$tmp/hf-short" && cp "$tmp/hf/config.json" "$tmp/hf-short/"
python3 - "$tmp/hf/model.safetensors" "$tmp/hf-short/model.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
del header["bert.embeddings.LayerNorm.bias"]  # its bytes stay, unnamed
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY
expect_error 3 "missing tensor 'bert.embeddings.LayerNorm.bias'" \
  train --config "$tmp/good.yaml" --init-from "$tmp/hf-short" --set "checkpoint.dir=$tmp/from-short"
mkdir -p "$tmp/no-meta" && cp "$tmp/ckpt/latest/model.safetensors" "$tmp/no-meta/"  # a checkpoint lost trainer.json
expect_error 3 "$tmp/no-meta: neither a checkpoint (trainer.json, or a 'latest' pointer) nor a Hugging Face" \
  eval --checkpoint "$tmp/no-meta" --data "$tmp/data/shards/*.lbs"
# Weights that give NaN (two steps at a learning rate of 1e38) are evaluated, and the result is
# said to be non-finite.
"$lb" train --config "$tmp/good.yaml" --set "checkpoint.dir=$tmp/blown" --set optimizer.lr=1e38 --stop-at-step 2 \
  > /dev/null 2>&1 || { echo "FAIL: the two steps at lr 1e38"; fail=1; }
err=$("$lb" eval --checkpoint "$tmp/blown" --data "$tmp/data/shards/*.lbs" --max-sequences 16 2>&1 >/dev/null) ||
  { echo "FAIL: eval of NaN-giving weights exited non-zero: $err"; fail=1; }
[[ $err == *"warning: the losses are not finite"* ]] || { echo "FAIL: no word on non-finite losses: $err"; fail=1; }
# A root whose 'latest' points to a checkpoint that is gone says so.
mkdir -p "$tmp/gone" && ln -s step-000000009 "$tmp/gone/latest"
expect_error 3 "$tmp/gone/latest points to step-000000009, which holds no checkpoint (no trainer.json)" \
  eval --checkpoint "$tmp/gone" --data "$tmp/data/shards/*.lbs"
cp -r "$tmp/hf" "$tmp/hf-big" && sed -i 's/"num_attention_heads": 2/"num_attention_heads": 2, "foo": 1e999/' "$tmp/hf-big/config.json"
expect_error 2 "$tmp/hf-big/config.json: a JSON number beyond a double's range (number overflow parsing '1e999')" \
  eval --checkpoint "$tmp/hf-big" --data "$tmp/data/shards/*.lbs"
cp -r "$tmp/hf" "$tmp/hf-bad" && sed -i 's/"num_attention_heads": 2/"num_attention_heads": 3/' "$tmp/hf-bad/config.json"
expect_error 2 "$tmp/hf-bad/config.json: field 'num_attention_heads': 3 heads do not divide hidden_size 64" \
  eval --checkpoint "$tmp/hf-bad" --data "$tmp/data/shards/*.lbs"
# The directory's vocab.txt checks the shards, and is named when they differ; one that does not
# load is an error naming it (it was once skipped, and the check with it).
cp -r "$tmp/hf" "$tmp/hf-vocab" && echo "extra" >> "$tmp/hf-vocab/vocab.txt"
expect_error 2 "vocabulary mismatch: the shard was made with a vocab of hash" \
  eval --checkpoint "$tmp/hf-vocab" --data "$tmp/data/shards/*.lbs"
expect_error 2 "the Hugging Face directory's vocab $tmp/hf-vocab/vocab.txt has hash" \
  eval --checkpoint "$tmp/hf-vocab" --data "$tmp/data/shards/*.lbs"
: > "$tmp/hf-vocab/vocab.txt"
expect_error 4 "the Hugging Face directory's vocab: $tmp/hf-vocab/vocab.txt: vocabulary is empty" \
  eval --checkpoint "$tmp/hf-vocab" --data "$tmp/data/shards/*.lbs"
# ... named by a relative path too (a Hugging Face directory's vocab.txt is its own, wherever
# it is named from; only a checkpoint's relative data.vocab may be another file).
(cd "$tmp" && fail=0 && expect_error 4 "the Hugging Face directory's vocab: hf-vocab/vocab.txt: vocabulary is empty" \
  eval --checkpoint hf-vocab --data "$tmp/data/shards/*.lbs" && exit $fail) || fail=1
# eval --json of a Hugging Face directory: no step, never packed unless asked.
hf_json=$("$lb" eval --checkpoint "$tmp/hf" --data "$tmp/data/shards/*.lbs" --max-sequences 8 --json 2>/dev/null)
python3 -c 'import json, sys; j = json.loads(sys.argv[1]); sys.exit(not (j["hugging_face"] is True and j["step"] is None
  and j["packing"] is False and j["sequences"] == 8 and j["rows"] == 8))' "$hf_json" ||
  { echo "FAIL: eval --json of a Hugging Face directory: $hf_json"; fail=1; }
# A checkpoint of a build from before the schedule refused keys its kind ignores (a linear
# schedule with a power, a warmup_steps of -5; written here without trainer.json's checksum,
# as such builds wrote it): eval and export read it, as they did then.
old=$tmp/old-schedule
cp -r "$(readlink -f "$tmp/ckpt/latest")" "$old"
python3 - "$old/trainer.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); j.pop("checksum", None)
j["config"]["schedule"].update({"kind": "linear", "power": 2, "warmup_steps": -5})
json.dump(j, open(p, "w"), indent=2)
PY
"$lb" eval --checkpoint "$old" --data "$tmp/data/shards/*.lbs" --max-sequences 16 > /dev/null 2>&1 ||
  { echo "FAIL: eval of a checkpoint whose schedule set a key its kind ignores"; fail=1; }
"$lb" export --checkpoint "$old" --out "$tmp/old-hf" > /dev/null 2>&1 ||
  { echo "FAIL: export of a checkpoint whose schedule set a key its kind ignores"; fail=1; }
(( fail )) && exit 1
echo "eval cli: ok"
