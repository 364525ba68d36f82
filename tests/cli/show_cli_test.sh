#!/usr/bin/env bash
# `lansbert show`: the sequences prep made, read back as words. Each sequence's segments, with
# the masked slots' targets put back, are runs of its corpus's text; each slot's kind
# ([MASK], kept, random) matches what the model sees; --stats counts what the shards hold;
# bad options and a vocab the shards were not made with are refused naming them.
# Usage: show_cli_test.sh LANSBERT SOURCE_DIR WRITE_NVIDIA_HDF5
source "$(dirname "$0")/cli_test_setup.sh" "$@"
write_hdf5=$3
cd "$tmp"

for d in $(seq 30); do
  for s in 1 2 3 4 5; do printf 'Document %d sentence %d talks about the unaffable crocodiles of the sea. ' $d $s; done
  printf '\n\n'
done > corpus.txt
"$bin" prep --vocab "$vocab" --input corpus.txt --out shards --no-progress > /dev/null
"$bin" prep --vocab "$vocab" --input corpus.txt --out dynamic --dynamic-masking --no-progress > /dev/null

"$bin" show --data shards --vocab "$vocab" --count 2 > two.txt || fail "show"
grep -q '^sequence 0 of [0-9]* (shards/shard-00000.lbs: sample 0)$' two.txt || fail "show: $(cat two.txt)"
grep -q '^sequence 1 of ' two.txt || fail "show --count 2: $(cat two.txt)"
(( $(grep -c '^  A: ' two.txt) == 2 && $(grep -c '^  B: ' two.txt) == 2 )) || fail "show: A/B lines: $(cat two.txt)"
grep -qE '^  next sentence: (random \(NSP label 1\)|the actual next \(NSP label 0\)) \| [0-9]+ of 128 positions \| [0-9]+ masked$' \
  two.txt || fail "show: the next-sentence line: $(cat two.txt)"

# Every sequence as JSON: restored, each segment is a run of the corpus's words.
n=$("$bin" show --data shards --vocab "$vocab" --stats --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["sequences"])')
"$bin" show --data shards --vocab "$vocab" --count "$n" --json > all.jsonl || fail "show --json"
"$bin" tokenize --vocab "$vocab" --tokens --no-special < corpus.txt > pieces.txt || fail "tokenize of corpus.txt"
python3 - pieces.txt all.jsonl "$n" <<'PY' || fail "show --json: the sequences are not the corpus's"
import json, sys
text = " ".join(open(sys.argv[1]).read().split())  # the corpus's word pieces
rows = [json.loads(l) for l in open(sys.argv[2])]
assert len(rows) == int(sys.argv[3]) and [r["index"] for r in rows] == list(range(len(rows))), "indices"
kinds = {"mask": 0, "kept": 0, "random": 0}
for r in rows:
    t = list(r["tokens"])
    assert t[0] == "[CLS]" and t[-1] == "[SEP]" and t[r["b_start"] - 1] == "[SEP]", r
    for m in r["masked"]:
        assert t[m["position"]] == m["input"], m
        want = "mask" if m["input"] == "[MASK]" else "kept" if m["input"] == m["original"] else "random"
        assert m["kind"] == want, m
        kinds[m["kind"]] += 1
        t[m["position"]] = m["original"]
    for seg in (t[1:r["b_start"] - 1], t[r["b_start"]:-1]):
        assert seg and " " + " ".join(seg) + " " in " " + text + " ", (r["index"], seg)
assert all(kinds.values()), kinds
PY
# --stats against the same numbers computed from the JSON of every sequence.
"$bin" show --data shards --vocab "$vocab" --stats --json > stats.json || fail "show --stats --json"
python3 - all.jsonl stats.json <<'PY' || fail "show --stats: not the sequences' numbers: $(cat stats.json)"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
st = json.load(open(sys.argv[2]))
n = len(rows)
tokens = sum(len(r["tokens"]) for r in rows)
masked = sum(len(r["masked"]) for r in rows)
unk = 0
for r in rows:
    t = list(r["tokens"])
    for m in r["masked"]:
        t[m["position"]] = m["original"]
    unk += t.count("[UNK]")
want = {"sequences": n, "tokens_per_sequence": tokens / n, "fill": tokens / (n * 128),
        "random_next": sum(r["random_next"] for r in rows) / n, "masked_per_sequence": masked / n,
        "mask_share": sum(m["kind"] == "mask" for r in rows for m in r["masked"]) / masked,
        "unk_share": unk / tokens}
for k, v in want.items():
    assert abs(st[k] - v) < 1e-9, (k, st[k], v)
PY
"$bin" show --data shards --vocab "$vocab" --stats > stats.txt || fail "show --stats"
grep -q "^$n sequences (from 0 of $n, in 1 shard), seq_len 128, max_pred 20$" stats.txt || fail "show --stats: $(cat stats.txt)"
grep -qE '^next sentence: [0-9.]+% random \(BERT: 50%\)$' stats.txt || fail "show --stats: $(cat stats.txt)"
grep -qE '^masked: [0-9.]+ per sequence' stats.txt || fail "show --stats: $(cat stats.txt)"
"$bin" show --data dynamic --vocab "$vocab" --count 1 | grep -q '0 masked (dynamic masking: masked when loaded, shown unmasked)' ||
  fail "show of dynamic shards"
# Unmasked, the segments read as the corpus's words: word pieces (una ##ffa ##ble, crocodile ##s)
# joined back.
"$bin" show --data dynamic --vocab "$vocab" --count 40 > words.txt || fail "show of dynamic shards"
grep -q 'unaffable crocodiles' words.txt || fail "show: word pieces not joined: $(head -5 words.txt)"
text=" $(tr 'A-Z' 'a-z' < corpus.txt | sed 's/\./ ./g' | tr -s ' \n' '  ') "
while IFS= read -r seg; do  # a segment cut inside a word starts or ends with a piece of it
  seg=$(sed -E 's/^##[a-z]+ //; s/ [a-z]+$//' <<< "$seg")
  [[ $text == *" $seg "* ]] || fail "show: a segment that is not the corpus's text: $seg"
done < <(sed -n 's/^  [AB]: //p' words.txt)

# NVIDIA's HDF5 files read as training reads them; a masked slot in the padding (the readers
# check only position < seq_len) is shown as such, not read past the sequence.
"$write_hdf5" nv.hdf5 || fail "write_nvidia_hdf5"
"$write_hdf5" nv-padding.hdf5 30 || fail "write_nvidia_hdf5 with a slot in the padding"
"$bin" show --data nv.hdf5 --vocab "$vocab" --count 1 > nv.txt || fail "show of an HDF5 file"
grep -q '^sequence 0 of 37 (nv.hdf5: sample 0)$' nv.txt || fail "show of an HDF5 file: $(cat nv.txt)"
"$bin" show --data nv-padding.hdf5 --vocab "$vocab" --count 1 > pad.txt || fail "show of a slot in the padding"
grep -qF ' 30 [PAD] <- ' pad.txt && grep -qF '(in the padding: no token there)' pad.txt ||
  fail "show of a slot in the padding: $(cat pad.txt)"
"$bin" show --data nv-padding.hdf5 --vocab "$vocab" --stats | grep -qF 'masked: 1 slot points into the padding' ||
  fail "show --stats of a slot in the padding"
"$bin" show --data nv-padding.hdf5 --vocab "$vocab" --count 1 --json | python3 -c '
import json, sys
m = json.load(sys.stdin)["masked"]
assert [s["kind"] for s in m if s["position"] == 30] == ["padding"], m' || fail "show --json of a slot in the padding"
# A count past the end stops at the end.
(( $("$bin" show --data nv.hdf5 --vocab "$vocab" --index 30 --count 9223372036854775807 | grep -c '^sequence ') == 7 )) ||
  fail "show --count past the end"

# expect_error RC MESSAGE ARGS...
expect_error() {
  local want_rc=$1 want_msg=$2 rc=0
  shift 2
  "$bin" show "$@" > /dev/null 2> err.txt || rc=$?
  (( rc == want_rc )) || fail "show $*: exit $rc, expected $want_rc: $(cat err.txt)"
  grep -qF -- "$want_msg" err.txt || fail "show $*: message lacks '$want_msg': $(cat err.txt)"
}
expect_error 2 "show: --index $n: the shards hold $n sequences (0 to $((n - 1)))" --data shards --vocab "$vocab" --index "$n"
expect_error 2 "--count: Value 0 not in range" --data shards --vocab "$vocab" --count 0
cp "$vocab" other-vocab.txt && echo extra-token >> other-vocab.txt
expect_error 2 "--vocab other-vocab.txt" --data shards --vocab other-vocab.txt
expect_error 3 "missing" --data missing --vocab "$vocab"
echo "show_cli_test: ok"
