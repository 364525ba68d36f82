#!/usr/bin/env bash
# scripts/get-wikipedia.py against a local mirror (file:// URLs) laid out as dumps.wikimedia.org
# is: --date latest takes the newest dump whose articles job is done, the split files arrive
# checked by SHA-1 and prep reads them; a second run fetches nothing; a file whose SHA-1 does
# not match is removed and named, and the run fails; bad arguments are refused.
# Usage: get_wikipedia_test.sh LANSBERT SOURCE_DIR
source "$(dirname "$0")/cli_test_setup.sh" "$@"
bin=$(realpath "$bin") vocab=$(realpath "$vocab")  # the test works in $tmp
script=$(cd "$2" && pwd)/scripts/get-wikipedia.py
cd "$tmp"

# Two split files of a small export, a newer dump still in progress and an older one.
page() { printf '<page><title>%s</title><ns>0</ns><revision><text>%s</text></revision></page>\n' "$1" "$2"; }
for part in 1 2; do
  {
    echo '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/">'
    for d in $(seq 20); do
      page "Doc $part-$d" "'''Doc $d''' of part $part is a [[document]] about topic $((d * part % 7)). It has a second sentence here.{{cite web|url=x}}

It also has a second paragraph, number $d."
    done
    echo '</mediawiki>'
  } | bzip2 > "part$part.bz2"
done
mkdir -p mirror/enwiki/20240101 mirror/enwiki/20240201
f1=enwiki-20240101-pages-articles1.xml-p1p20.bz2
f2=enwiki-20240101-pages-articles2.xml-p21p40.bz2
cp part1.bz2 mirror/enwiki/20240101/$f1
cp part2.bz2 mirror/enwiki/20240101/$f2
status() {  # status JOB_STATUS SHA1_OF_FILE2
  printf '{"jobs": {"articlesdump": {"status": "%s", "files": {
    "%s": {"size": %d, "url": "/enwiki/20240101/%s", "sha1": "%s"},
    "%s": {"size": %d, "url": "/enwiki/20240101/%s", "sha1": "%s"}}}}}\n' "$1" \
    $f1 "$(stat -c %s part1.bz2)" $f1 "$(sha1sum < part1.bz2 | cut -c1-40)" \
    $f2 "$(stat -c %s part2.bz2)" $f2 "$2"
}
status done "$(sha1sum < part2.bz2 | cut -c1-40)" > mirror/enwiki/20240101/dumpstatus.json
echo '{"jobs": {"articlesdump": {"status": "in-progress", "files": {}}}}' > mirror/enwiki/20240201/dumpstatus.json
mkdir -p mirror/enwiki/20231201  # older and done: "latest" must not take it
echo '{"jobs": {"articlesdump": {"status": "done", "files": {}}}}' > mirror/enwiki/20231201/dumpstatus.json

get() { python3 "$script" --mirror "file://$tmp/mirror" --out dl "$@"; }
get > cmds.txt 2> log.txt || fail "download: $(cat log.txt)"
grep -qF "enwiki 20240101: 2 files" log.txt || fail "latest is not the finished 20240101: $(cat log.txt)"
cmp dl/enwiki-20240101/$f1 part1.bz2 && cmp dl/enwiki-20240101/$f2 part2.bz2 || fail "the files differ"
grep -qF "lansbert prep --vocab vocab.txt --input" cmds.txt || fail "no prep command printed: $(cat cmds.txt)"
# The printed commands run as printed (with this build, this vocab, and a held-out share that
# 20 articles a file can fill): phase 1 and phase 2 shards, each file with its held-out set.
(( $(wc -l < cmds.txt) == 2 )) || fail "not two prep commands: $(cat cmds.txt)"
sed -e "s|lansbert prep|$bin prep|" -e "s|vocab.txt|$vocab|" -e "s|--heldout-fraction 0.005|--heldout-fraction 0.3|" \
  cmds.txt > run-cmds.sh
bash run-cmds.sh > /dev/null 2> run-cmds.err || fail "the printed prep commands: $(cat run-cmds.err)"
for p in p1 p2 p1-heldout p2-heldout; do
  (( $(ls shards/$p/*/shard-*.lbs | wc -l) == 2 )) || fail "shards/$p: $(ls -R shards)"
done
"$bin" show --data 'shards/p2/*/shard-*.lbs' --vocab "$vocab" --stats | grep -q 'seq_len 512, max_pred 80' ||
  fail "phase 2 shards: $("$bin" show --data 'shards/p2/*/shard-*.lbs' --vocab "$vocab" --stats)"
rm -rf shards
get --date 20240101 > /dev/null 2> log.txt || fail "second run: $(cat log.txt)"
[[ $(grep -c "already here" log.txt) == 2 ]] || fail "the second run fetched again: $(cat log.txt)"
"$bin" prep --vocab "$vocab" --input dl/enwiki-20240101/*.bz2 --out shards --no-progress > prep.txt ||
  fail "prep of the downloaded files"
grep -qF "40 documents" prep.txt || fail "prep did not read the 40 articles: $(cat prep.txt)"

# A SHA-1 that does not match: the file is removed, named, and the run fails.
status done 0000000000000000000000000000000000000000 > mirror/enwiki/20240101/dumpstatus.json
rm -rf dl
rc=0; get --date 20240101 > /dev/null 2> log.txt || rc=$?
(( rc == 1 )) || fail "a bad SHA-1: exit $rc: $(cat log.txt)"
grep -qF "$f2: SHA-1 $(sha1sum < part2.bz2 | cut -c1-40), dumpstatus.json says 0000" log.txt || fail "$(cat log.txt)"
[[ -f dl/enwiki-20240101/$f1 && ! -e dl/enwiki-20240101/$f2 && ! -e dl/enwiki-20240101/$f2.part ]] ||
  fail "after a bad SHA-1: $(ls dl/enwiki-20240101)"
rc=0; get --date 20240201 > /dev/null 2> log.txt || rc=$?
(( rc == 1 )) && grep -qF "the 'articlesdump' job is 'in-progress', not done" log.txt || fail "in progress: $(cat log.txt)"
rc=0; get --date 2024 > /dev/null 2> log.txt || rc=$?
(( rc == 1 )) && grep -qF -- "--date 2024: expected latest or YYYYMMDD" log.txt || fail "bad date: $(cat log.txt)"
echo "get_wikipedia_test: ok"
