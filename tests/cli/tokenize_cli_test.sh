#!/usr/bin/env bash
# End-to-end checks of `lansbert tokenize` and `lansbert vocab`: output format, stdin,
# invalid UTF-8 errors naming file/line/offset, --skip-invalid, vocab's refusal to
# overwrite, its atomic write and the defaults its --help shows.
# Usage: tokenize_cli_test.sh LANSBERT SOURCE_DIR
source "$(dirname "$0")/cli_test_setup.sh" "$@"

printf 'Hello, world!\nunaffable\n' > "$tmp/in.txt"
out=$("$bin" tokenize --vocab "$vocab" "$tmp/in.txt")
[[ $out == $'101 7592 1010 2088 999 102\n101 14477 20961 3468 102' ]] || fail "ids: $out"
out=$(printf 'Hello, world!\n' | "$bin" tokenize --vocab "$vocab" --tokens)
[[ $out == '[CLS] hello , world ! [SEP]' ]] || fail "tokens from stdin: $out"
out=$(printf 'Hello\n' | "$bin" tokenize --vocab "$vocab" --tokens --cased --no-special)
[[ $out == '[UNK]' ]] || fail "cased: $out"

# Invalid UTF-8 on line 2, byte 3 of the line (text byte 9), plain and gzip-compressed.
printf 'line one\nab\xC3(\nlast\n' > "$tmp/bad.txt"
set +e
err=$("$bin" tokenize --vocab "$vocab" "$tmp/bad.txt" 2>&1 >/dev/null); rc=$?
set -e
(( rc != 0 )) || fail "invalid UTF-8 exited 0"
[[ $err == *"bad.txt:2: invalid UTF-8 at byte offset 2 (truncated sequence)"*"text byte 9"* ]] ||
  fail "error message: $err"
gzip -c "$tmp/bad.txt" > "$tmp/bad.txt.gz"
set +e
err=$("$bin" tokenize --vocab "$vocab" "$tmp/bad.txt.gz" 2>&1 >/dev/null); rc=$?
set -e
(( rc != 0 )) && [[ $err == *"bad.txt.gz:2: invalid UTF-8 at byte offset 2"*"text byte 9"* ]] ||
  fail "gzip error message: $err"
out=$(printf 'Hello, world!\n\nlast' | gzip -c | "$bin" tokenize --vocab "$vocab" --tokens)
[[ $out == $'[CLS] hello , world ! [SEP]\n[CLS] [SEP]\n[CLS] last [SEP]' ]] || fail "gzip from stdin: $out"
set +e
err=$(printf '\xFF\n' | "$bin" tokenize --vocab "$vocab" 2>&1 >/dev/null); rc=$?
set -e
(( rc != 0 )) && [[ $err == *"<stdin>:1: invalid UTF-8 at byte offset 0"* ]] || fail "stdin error: $err"
out=$("$bin" tokenize --vocab "$vocab" --skip-invalid "$tmp/bad.txt" 2>"$tmp/err")
[[ $(echo "$out" | wc -l) == 2 ]] || fail "skip-invalid output: $out"
grep -q "skipped 1 line" "$tmp/err" || fail "skip-invalid count: $(cat "$tmp/err")"
set +e
"$bin" tokenize --vocab "$tmp/missing.txt" "$tmp/in.txt" 2>/dev/null; rc=$?
set -e
(( rc == 3 )) || fail "missing vocab exit code $rc"

# vocab: trains, refuses to overwrite, --force overwrites.
for i in 1 2 3 4 5; do cat "$tmp/in.txt"; echo "tokenizers tokenize text into tokens"; done > "$tmp/corpus.txt"
"$bin" vocab --input "$tmp/corpus.txt" --size 150 --out "$tmp/v.txt" 2>/dev/null
[[ $(sed -n '101p' "$tmp/v.txt") == '[UNK]' ]] || fail "vocab layout"
set +e
"$bin" vocab --input "$tmp/corpus.txt" --size 150 --out "$tmp/v.txt" 2>/dev/null; rc=$?
set -e
(( rc != 0 )) || fail "vocab overwrote without --force"
"$bin" vocab --input "$tmp/corpus.txt" --size 150 --out "$tmp/v.txt" --force 2>/dev/null
[[ -z $(ls "$tmp" | grep '\.tmp\.') ]] || fail "temporary file left behind"
# An --out that can never be written is refused before the corpus is read, naming the flag;
# one in a new directory creates it.
set +e
err=$("$bin" vocab --input "$tmp/corpus.txt" --size 150 --out "$tmp/v.txt/sub/v.txt" 2>&1); rc=$?
set -e
(( rc == 2 )) && [[ $err == *"--out: $tmp/v.txt/sub/v.txt: cannot be created, $tmp/v.txt is not a directory"* ]] ||
  fail "vocab --out under a file: exit $rc, $err"
"$bin" vocab --input "$tmp/corpus.txt" --size 150 --out "$tmp/new/dir/v.txt" 2>/dev/null
cmp -s "$tmp/v.txt" "$tmp/new/dir/v.txt" || fail "vocab --out in a new directory"
# The corpus as JSON Lines (a record a line here), gzip-compressed, or on stdin: the same vocab.
awk '{ printf "{\"text\": \"%s\"}\n", $0 }' "$tmp/corpus.txt" | gzip > "$tmp/corpus.jsonl.gz"
"$bin" vocab --input "$tmp/corpus.jsonl.gz" --size 150 --out "$tmp/v-jsonl.txt" 2>/dev/null
cmp -s "$tmp/v.txt" "$tmp/v-jsonl.txt" || fail "vocab of the corpus as gzip JSON Lines differs"
"$bin" vocab --input - --size 150 --out "$tmp/v-stdin.txt" < "$tmp/corpus.txt" 2>/dev/null
cmp -s "$tmp/v.txt" "$tmp/v-stdin.txt" || fail "vocab of the corpus on stdin differs"
zstd -q -c "$tmp/corpus.txt" | "$bin" vocab --input - --size 150 --out "$tmp/v-zstdin.txt" 2>/dev/null
cmp -s "$tmp/v.txt" "$tmp/v-zstdin.txt" || fail "vocab of the corpus, Zstandard on stdin, differs"
set +e
err=$("$bin" vocab --input "$tmp/corpus.txt" --input-format jsonl --size 150 --out "$tmp/v-bad.txt" 2>&1); rc=$?
set -e
(( rc == 4 )) && [[ $err == *"$tmp/corpus.txt:1: not a JSON record (at byte offset 0 of the line"* ]] ||
  fail "vocab of text read as JSON Lines: exit $rc, $err"
# A number no double holds is a bad record like any other (it once ended the program).
printf '{"text": "fine words"}\n{"text": "more words", "n": 1e309}\n' > "$tmp/big.jsonl"
set +e
err=$("$bin" vocab --input "$tmp/big.jsonl" --size 150 --out "$tmp/v-big.txt" 2>&1); rc=$?
set -e
(( rc == 4 )) && [[ $err == *"$tmp/big.jsonl:2: a JSON number beyond a double's range (number overflow parsing '1e309')"* ]] ||
  fail "vocab of a JSON record with 1e309: exit $rc, $err"
# No words, no vocabulary (it would be the special tokens alone); a directory as --out is
# refused as one, not offered --force.
: > "$tmp/empty.txt"
set +e
err=$("$bin" vocab --input "$tmp/empty.txt" --size 150 --out "$tmp/v-empty.txt" 2>&1); rc=$?
set -e
(( rc == 2 )) && [[ $err == *"vocab: the input holds no words (empty input?)"* && ! -e $tmp/v-empty.txt ]] ||
  fail "vocab of an empty corpus: exit $rc, $err"
# Words only past the tokenizer's 100 characters: said so, not "no words".
printf '%0101d %0150d\n' 0 0 > "$tmp/long-words.txt"
set +e
err=$("$bin" vocab --input "$tmp/long-words.txt" --size 150 --out "$tmp/v-long.txt" 2>&1); rc=$?
set -e
(( rc == 2 )) && [[ $err == *"the input's only words are longer than 100 characters (2 occurrences)"* && ! -e $tmp/v-long.txt ]] ||
  fail "vocab of a corpus of over-long words: exit $rc, $err"
set +e
err=$("$bin" vocab --input "$tmp/corpus.txt" --size 150 --out "$tmp/new" 2>&1); rc=$?
set -e
(( rc == 2 )) && [[ $err == *"--out: $tmp/new exists and is not a regular file"* ]] ||
  fail "vocab --out a directory: exit $rc, $err"
toks=$("$bin" tokenize --vocab "$tmp/v.txt" --tokens --no-special "$tmp/corpus.txt") || fail "tokenize with the trained vocab"
[[ -n $toks && $toks != *UNK* ]] || fail "trained vocab gives [UNK] on its own text (or nothing)"
# vocab --help shows each default (BERT's: 30522 tokens, 99 [unusedN]) beside its option.
help=$("$bin" vocab --help | tr -s ' \n' ' ')
for want in '--size INT:INT in [5 - 16777216]=30522 ' '--min-frequency INT:INT in [0 - 1000000000]=2 ' \
            '--unused INT:INT in [0 - 1048576]=99 '; do
  [[ $help == *"$want"* ]] || fail "vocab --help lacks '$want': $help"
done
# --ids, --tokens and --words each choose the output: two at once are refused, not one ignored.
for pair in "--tokens --words" "--ids --words" "--ids --tokens"; do
  set +e
  err=$(echo hello | "$bin" tokenize --vocab "$vocab" $pair 2>&1); rc=$?
  set -e
  (( rc == 2 )) && [[ $err == *"excludes"* ]] || fail "tokenize $pair: exit $rc, $err"
done
echo "tokenize_cli_test: ok"
