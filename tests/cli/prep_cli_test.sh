#!/usr/bin/env bash
# End-to-end checks of `lansbert prep` on bad input: every failure exits non-zero with an
# error naming the option or file, and leaves the shards of an earlier run byte-identical.
# The same documents as JSON Lines or as a Wikipedia-style dump, or compressed (gzip, Zstandard,
# bzip2), give the same shards.
# Usage: prep_cli_test.sh LANSBERT SOURCE_DIR
source "$(dirname "$0")/cli_test_setup.sh" "$@"
cd "$tmp"

for d in $(seq 40); do
  for s in 1 2 3 4 5 6; do printf 'Document %d sentence %d says something about topic %d. ' $d $s $((d * s % 17)); done
  printf '\n\n'
done > corpus.txt
"$bin" prep --vocab "$vocab" --input corpus.txt --out shards --no-progress --dupe-factor 2 > /dev/null
ls shards/shard-*.lbs > /dev/null || fail "the good run wrote no shards"
sha() { (cd shards && sha256sum shard-*.lbs); }
good=$(sha)
# The bytes of this run, as every lansbert since 31c3eeb has made them (checked against that
# build when the held-out split, --dedup and books were added): a change to instance creation,
# masking, the tokenizer or the shard format shows here first. Change it only on purpose.
[[ $good == "540a7a06c50d7587bb0181575c4c876728762f4e243d6c128254f7910d3217e2  shard-00000.lbs" ]] ||
  fail "the shards of corpus.txt changed: $good"

# expect_refused RC MESSAGE ARGS...: prep with ARGS into shards/ must exit RC, print MESSAGE,
# and leave shards/ as the good run wrote it.
expect_refused() {
  local want_rc=$1 want_msg=$2 rc=0
  shift 2
  "$bin" prep --vocab "$vocab" --out shards --no-progress "$@" > /dev/null 2> err.txt || rc=$?
  (( rc == want_rc )) || fail "prep $*: exit $rc, expected $want_rc: $(cat err.txt)"
  grep -qF -- "$want_msg" err.txt || fail "prep $*: message lacks '$want_msg': $(cat err.txt)"
  [[ $(sha) == "$good" ]] || fail "prep $*: the existing shards changed"
}

expect_refused 2 "--block-mb 0: must be" --input corpus.txt --block-mb 0
expect_refused 2 "--block-mb 1e+99: must be" --input corpus.txt --block-mb 1e99
expect_refused 2 "--block-mb -1: must be" --input corpus.txt --block-mb -1
expect_refused 2 "--block-mb nan: must be" --input corpus.txt --block-mb nan
expect_refused 2 "--threads 100000: must be in [0, 1024]" --input corpus.txt --threads 100000
expect_refused 2 "--threads -1: must be" --input corpus.txt --threads -1
expect_refused 2 "--masked-lm-prob nan: must be" --input corpus.txt --masked-lm-prob nan
expect_refused 2 "--short-seq-prob nan: must be" --input corpus.txt --short-seq-prob nan
expect_refused 2 "--seed: '-1': the seed is unsigned" --input corpus.txt --seed -1
expect_refused 2 "--seed: '18446744073709551616': the seed is unsigned" --input corpus.txt --seed 18446744073709551616
expect_refused 2 "--seq-len 70000: must be" --input corpus.txt --seq-len 70000
expect_refused 2 "--shard-size: Value 99999999999999999999 not in range" --input corpus.txt --shard-size 99999999999999999999
expect_refused 3 "missing.txt: cannot read input" --input corpus.txt missing.txt
mkdir adir
expect_refused 2 "--input adir: is a directory" --input corpus.txt adir
: > empty.txt
expect_refused 2 "the input files are empty (empty.txt)" --input empty.txt
expect_refused 2 "--heldout-fraction needs --heldout-out" --input corpus.txt --heldout-fraction 0.1
expect_refused 2 "--heldout-out: empty path" --input corpus.txt --heldout-out ''
expect_refused 2 "--heldout-out ./shards: is the --out directory" --input corpus.txt --heldout-out ./shards
expect_refused 2 "--heldout-out shards/: is the --out directory (shards)" --input corpus.txt --heldout-out shards/
expect_refused 2 "--heldout-fraction 1.5: must be more than 0" --input corpus.txt --heldout-out held --heldout-fraction 1.5
expect_refused 2 "held out none of the 40 documents" --input corpus.txt --heldout-out held --heldout-fraction 1e-9
[[ ! -e held ]] || fail "a refused held-out run left held/ behind"
# Failures found while the run is under way: the earlier shards must survive them too.
printf 'Good text.\n\nab\xC3(\n' > bad.txt
expect_refused 4 "bad.txt:3: invalid UTF-8 at byte offset 2" --input corpus.txt bad.txt
printf '\n \n\t\n' > blank.txt
expect_refused 2 "no instances" --input blank.txt
if (( $(id -u) != 0 )); then  # root reads anything
  cp corpus.txt locked.txt && chmod 000 locked.txt
  expect_refused 5 "locked.txt: cannot open input" --input locked.txt
fi
[[ -z $(ls -A shards | grep -v '^shard-') ]] || fail "left behind in shards/: $(ls -A shards)"

# JSON Lines, gzip and Zstandard: the good run's documents as records (--input-format auto by
# the name), plain or compressed, give its shards byte for byte.
awk 'NF { printf "{\"id\": %d, \"text\": \"%s\"}\n", NR, $0 }' corpus.txt > corpus.jsonl
gzip -k corpus.jsonl && gzip -k corpus.txt && zstd -q -k corpus.jsonl && zstd -q -k corpus.txt
# Each document as two paragraph lines ("\n" inside the JSON string), under another key.
awk 'NF { line=$0; sub(/\. /, ".\\\\n", line); printf "{\"body\": \"%s\", \"text\": 1}\n", line }' corpus.txt > body.json
for f in corpus.jsonl corpus.jsonl.gz corpus.txt.gz corpus.jsonl.zst corpus.txt.zst "body.json --json-key body"; do
  rm -rf other && "$bin" prep --vocab "$vocab" --input $f --out other --no-progress --dupe-factor 2 > /dev/null ||
    fail "prep of $f"
  [[ $(cd other && sha256sum shard-*.lbs) == "$good" ]] || fail "prep of $f: not the shards of corpus.txt"
done
grep -qF '.\nDocument' body.json || fail "body.json has no newline inside its records"
head -c $(( $(stat -c %s corpus.txt.gz) / 2 )) corpus.txt.gz > cut.txt.gz
expect_refused 4 "cut.txt.gz: cannot read after line" --input cut.txt.gz
grep -qF "unexpected end of file" err.txt || fail "a gzip file cut short: $(cat err.txt)"
printf '{"text": "One. Two."}\n{"text": 7}\n' > bad.jsonl
head -c $(( $(stat -c %s corpus.jsonl.zst) / 2 )) corpus.jsonl.zst > cut.jsonl.zst
expect_refused 4 "cut.jsonl.zst: cannot read after line" --input cut.jsonl.zst
expect_refused 4 "bad.jsonl:2: not a JSON object with a string field 'text' (--json-key)" --input bad.jsonl
expect_refused 4 "corpus.txt.gz:1: not a JSON record (at byte offset 0 of the line" --input corpus.txt.gz \
  --input-format jsonl
expect_refused 2 "--input-format xml: expected auto, text, jsonl, mediawiki or book" --input corpus.txt --input-format xml

# A MediaWiki export (bzip2, as Wikipedia's dumps are) whose articles are the documents with
# wiki markup around them, beside a talk page and a redirect, gives the same shards.
awk 'BEGIN { print "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\">" }
  NF { n++; line = $0
       sub(/^Document/, "[[Document (text)|Document]]", line); sub(/ says /, " \047\047\047says\047\047\047 ", line)
       printf "<page><title>Doc %d</title><ns>0</ns><revision><text>{{Infobox doc\n| n = %d\n}}\n", n, n
       printf "== Body ==\n%s&lt;ref&gt;Source %d.&lt;/ref&gt;\n\n== See also ==\n* [[Doc]]</text></revision></page>\n", line, n
       printf "<page><title>Talk:Doc %d</title><ns>1</ns><revision><text>Not an article.</text></revision></page>\n", n
       printf "<page><title>D%d</title><ns>0</ns><redirect title=\"Doc\"/><revision><text>#REDIRECT [[Doc]]</text></revision></page>\n", n }
  END { print "</mediawiki>" }' corpus.txt > wiki.xml
grep -qF "[[Document (text)|Document]] 1 sentence 1 '''says''' something" wiki.xml || fail "wiki.xml lacks its markup: $(head -c 600 wiki.xml)"
bzip2 -k wiki.xml
rm -rf other && "$bin" prep --vocab "$vocab" --input wiki.xml.bz2 --out other --no-progress --dupe-factor 2 > /dev/null ||
  fail "prep of wiki.xml.bz2"
[[ $(cd other && sha256sum shard-*.lbs) == "$good" ]] || fail "prep of wiki.xml.bz2: not the shards of corpus.txt"
# stdin ("-"), as from `lbzip2 -dc dump.xml.bz2 |`: the same shards; given twice, refused.
rm -rf other && bzip2 -dc wiki.xml.bz2 | "$bin" prep --vocab "$vocab" --input - --input-format mediawiki --out other \
  --dupe-factor 2 > /dev/null 2> stdin.err || fail "prep of stdin: $(cat stdin.err)"
[[ $(cd other && sha256sum shard-*.lbs) == "$good" ]] || fail "prep of stdin: not the shards of corpus.txt"
expect_refused 2 "--input: '-' (stdin) given more than once" --input - - < corpus.txt
expect_refused 2 "--input -: stdin is closed" --input - <&-
expect_refused 2 "--input -: stdin is a directory" --input - < adir
# stdin among files, a file on stdin (its size known): the shards of the files in that order.
head -n 40 corpus.txt > first.txt && tail -n +41 corpus.txt > rest.txt
rm -rf other && "$bin" prep --vocab "$vocab" --input first.txt - --out other --no-progress --dupe-factor 2 < rest.txt \
  > /dev/null || fail "prep of a file and stdin"
[[ $(cd other && sha256sum shard-*.lbs) == "$good" ]] || fail "prep of first.txt and stdin: not the shards of corpus.txt"
head -c $(( $(stat -c %s wiki.xml.bz2) / 2 )) wiki.xml.bz2 > cut-pages-articles1.xml-p1p40.bz2
expect_refused 4 "cut-pages-articles1.xml-p1p40.bz2: cannot read after XML line" --input cut-pages-articles1.xml-p1p40.bz2
printf '<?xml version="1.0"?>\n<rss><item>Hi</item></rss>\n' > feed.xml
expect_refused 4 "feed.xml:2:1: not a MediaWiki XML export: its root element is <rss>" --input feed.xml
cp feed.xml feed.txt
expect_refused 2 "feed.txt:1: XML in a file read as text (--input-format auto, by its name): pass --input-format mediawiki" \
  --input feed.txt

# A held-out set beside the training shards (its content: tests/data/prep_heldout_test.cc);
# the last line counts it.
"$bin" prep --vocab "$vocab" --input corpus.txt --out split --heldout-out split/held --heldout-fraction 0.25 \
  --no-progress > split.out || fail "prep with --heldout-out"
grep -qE '^prep: held out [0-9]+ of the 40 documents \([0-9.]+%\) -> [0-9]+ instances in 1 shard under split/held \(masked, one pass: for data.eval\)$' \
  split.out || fail "prep with --heldout-out: $(cat split.out)"
[[ -f split/shard-00000.lbs && -f split/held/shard-00000.lbs ]] || fail "prep with --heldout-out: $(ls -R split)"

# A book (--input-format book): a Project Gutenberg-style file, hard-wrapped with CRLF line ends,
# headings, a note and a licence around the text, is one document: the shards of that text as
# one line of a text file.
doc=$(sed -n 1p corpus.txt)
printf '%s\n\n' "$doc" > book-as-text.txt
{ printf 'The Project Gutenberg eBook of Test\n\nLicence text.\n\n*** START OF THE PROJECT GUTENBERG EBOOK TEST ***\n\n'
  printf 'Produced by a test.\n\nCHAPTER I.\n\n[Illustration: a\ndrawing]\n\n'
  printf '%s\n' "$doc" | fold -s -w 60
  printf '\n* * *\n\n*** END OF THE PROJECT GUTENBERG EBOOK TEST ***\nMore licence.\n'; } | sed 's/$/\r/' > pg-test.txt
grep -q $'\r$' pg-test.txt && (( $(wc -l < pg-test.txt) > 12 )) || fail "pg-test.txt is not a wrapped CRLF book"
"$bin" prep --vocab "$vocab" --input book-as-text.txt --out book-text --no-progress > /dev/null || fail "prep of book-as-text.txt"
"$bin" prep --vocab "$vocab" --input pg-test.txt --input-format book --out book --no-progress > /dev/null ||
  fail "prep --input-format book"
[[ $(cd book && sha256sum shard-*.lbs) == $(cd book-text && sha256sum shard-*.lbs) ]] ||
  fail "prep --input-format book: not the shards of its text"
expect_refused 2 "pg-test.txt:1: a Project Gutenberg book in a file read as text (--input-format auto, by its name): pass --input-format book" \
  --input pg-test.txt
# Only a book's opening line is taken for one: a line that mentions Project Gutenberg is text,
# and a JSON record is told JSON Lines whatever it says.
printf 'Project Gutenberg is a volunteer effort to digitize books.\nIt began in 1971.\n' > mentions.txt
"$bin" prep --vocab "$vocab" --input mentions.txt --out mentions --no-progress > /dev/null ||
  fail "prep of a text that mentions Project Gutenberg"
printf '{"text": "The Project Gutenberg eBook of Test"}\n' > record.txt
expect_refused 2 "record.txt:1: a JSON record with a string field 'text' in a file read as text" --input record.txt
printf '**The Project Gutenberg Etext of Moby Dick**\n\nCall me Ishmael.\n' > old-etext.txt
expect_refused 2 "old-etext.txt:1: a Project Gutenberg book" --input old-etext.txt
# A corpus of one sentence per record gives next-sentence prediction nothing: prep says so.
awk 'NF { n = split($0, s, /\. /); for (i = 1; i <= n; i++) if (s[i] ~ /[a-z]/) printf "{\"text\": \"%s.\"}\n", s[i] }' corpus.txt > sentences.jsonl
"$bin" prep --vocab "$vocab" --input sentences.jsonl --out sentences --no-progress > /dev/null 2> sentences.err ||
  fail "prep of sentences.jsonl"
grep -qF "prep: warning: 100.0% of the 240 documents are a single sentence" sentences.err ||
  fail "no warning for one-sentence documents: $(cat sentences.err)"
# Half the documents of one sentence is not more than half: no warning; three of five is.
printf 'One here.\n\nTwo here.\n\nThree here. And more.\n\nFour here. And more.\n\n' > half.txt
"$bin" prep --vocab "$vocab" --input half.txt --out half --no-progress > /dev/null 2> half.err || fail "prep of half.txt"
[[ ! -s half.err ]] || fail "a warning at 50%: $(cat half.err)"
printf 'Five here.\n' >> half.txt
"$bin" prep --vocab "$vocab" --input half.txt --out half --no-progress > /dev/null 2> half.err || fail "prep of half.txt"
grep -qF "prep: warning: 60.0% of the 5 documents are a single sentence" half.err || fail "no warning at 60%: $(cat half.err)"
grep -qF -- "--records-per-document" sentences.err || fail "the warning does not name --records-per-document"
# Six records a document make corpus.txt's documents again: its shards, byte for byte.
"$bin" prep --vocab "$vocab" --input sentences.jsonl --records-per-document 6 --out regrouped --dupe-factor 2 \
  --no-progress > /dev/null 2> regrouped.err || fail "prep --records-per-document 6: $(cat regrouped.err)"
[[ ! -s regrouped.err ]] || fail "prep --records-per-document 6 warned: $(cat regrouped.err)"
[[ $(cd regrouped && sha256sum shard-*.lbs) == "$good" ]] || fail "prep --records-per-document 6: not corpus.txt's shards"
expect_refused 2 "--records-per-document 0: must be in [1, 1048576]" --input sentences.jsonl --records-per-document 0
"$bin" prep --vocab "$vocab" --input corpus.txt --out one-doc-warning --no-progress > /dev/null 2> corpus.err
[[ ! -s corpus.err ]] || fail "prep of corpus.txt printed on stderr: $(cat corpus.err)"

# --dedup: the corpus twice gives the corpus's shards, the copies counted.
cat corpus.txt corpus.txt > twice.txt
"$bin" prep --vocab "$vocab" --input twice.txt --out deduped --dedup --dupe-factor 2 --no-progress > dedup.out ||
  fail "prep --dedup"
grep -qF 'prep: --dedup dropped 40 exact duplicates of earlier documents (50.00% of the 80 read)' dedup.out ||
  fail "prep --dedup: $(cat dedup.out)"
[[ $(cd deduped && sha256sum shard-*.lbs) == "$good" ]] || fail "prep --dedup of the corpus twice: not its shards"
# --near-dedup: copies are near too; no two of the corpus's own documents are (their shards).
"$bin" prep --vocab "$vocab" --input twice.txt --out near --near-dedup 0.8 --dupe-factor 2 --no-progress > near.out ||
  fail "prep --near-dedup"
grep -qF 'prep: --near-dedup 0.8 dropped 40 documents near an earlier kept one (50.00% of the 80 read); MinHash of 5-token shingles, 10 bands of 12' near.out ||
  fail "prep --near-dedup: $(cat near.out)"
[[ $(cd near && sha256sum shard-*.lbs) == "$good" ]] || fail "prep --near-dedup of the corpus twice: not its shards"
"$bin" prep --vocab "$vocab" --input twice.txt --out near-after-exact --dedup --near-dedup 0.8 --dupe-factor 2 \
  --no-progress > near2.out || fail "prep --dedup --near-dedup"
grep -qF 'prep: --dedup dropped 40 exact duplicates of earlier documents (50.00% of the 80 read)' near2.out &&
  grep -qF 'prep: --near-dedup 0.8 dropped 0 documents near an earlier kept one (0.00% of the 40 left by --dedup)' near2.out ||
  fail "prep --dedup --near-dedup: $(cat near2.out)"
expect_refused 2 "--near-dedup 0.3: must be a Jaccard similarity in [0.5, 0.99]" --input corpus.txt --near-dedup 0.3
expect_refused 2 "--near-dedup nan: must be" --input corpus.txt --near-dedup nan
expect_refused 2 "--near-dedup '0': must be a Jaccard similarity" --input corpus.txt --near-dedup 0  # off is no option
expect_refused 2 "--near-dedup '(empty)': must be" --input corpus.txt --near-dedup ''  # an unset \$J, say

# A good run with other parameters replaces the shards; other files in the directory stay.
echo keep > shards/notes.txt
"$bin" prep --vocab "$vocab" --input corpus.txt --out shards --no-progress --dupe-factor 1 --shard-size 50 > /dev/null
[[ $(sha) != "$good" ]] || fail "the second good run did not replace the shards"
[[ $(cat shards/notes.txt) == keep ]] || fail "prep removed a file that is not a shard"
[[ -z $(ls -A shards | grep -v -e '^shard-[0-9]*\.lbs$' -e '^notes.txt$') ]] || fail "left behind: $(ls -A shards)"
# convert reads NVIDIA's HDF5 shards only (tests/data/hdf5_convert_test.cc converts them): a
# lansbert shard or no file at all is refused before anything is written.
before=$(sha)
out=$("$bin" convert --vocab "$vocab" --input "shards/*.lbs" --out shards 2>&1) && fail "convert of lansbert shards succeeded"
[[ $out == *"shards/shard-00000.lbs: a lansbert shard, not an HDF5 file"* ]] || fail "convert of .lbs: $out"
[[ $(sha) == "$before" ]] || fail "a refused convert changed the shards"
rc=0
"$bin" convert --vocab "$vocab" --input nothing-here.h5 --out converted > /dev/null 2>&1 || rc=$?
[[ $rc == 3 ]] || fail "convert of a missing file: exit $rc, not 3"
[[ ! -e converted ]] || fail "a refused convert created its --out"
echo "prep_cli_test: ok"
