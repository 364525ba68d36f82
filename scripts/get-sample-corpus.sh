#!/usr/bin/env bash
# Fetches a small public English corpus from Debian packages (README.md) and, when a lansbert
# binary is at hand, turns it into phase-1 shards:
#   data/sample/jargon.txt, data/sample/foldoc.txt   one document per dictionary entry
#   data/sample/heldout.txt                          every 50th entry of each, kept out of
#                                                    the two files above (held-out loss)
#   data/sample/shards-128/, shards-128-heldout/     lansbert prep, seq 128, max-pred 20
# Usage: scripts/get-sample-corpus.sh [path/to/lansbert]   (default: build/lansbert)
# Idempotent: text that exists is kept; shards are remade only when missing or older than
# the text. Packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x` in
# a temporary directory; nothing is installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/data/sample
lansbert=${1:-$root/build/lansbert}
mkdir -p "$out"

if [[ ! -s $out/jargon.txt || ! -s $out/foldoc.txt || ! -s $out/heldout.txt ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download dict-jargon dict-foldoc >/dev/null)
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
  python3 - "$tmp/root/usr/share/dictd" "$out" <<'PY'
# dictd: .index lines are "headword<TAB>offset<TAB>length", offset/length in base64 digits
# (A-Za-z0-9+/, most significant first) into the uncompressed .dict (gzip-compatible .dz).
# Output: per entry, the headword line, then each body paragraph on one line; a blank line
# between entries. Foldoc {links} keep their text, <category> tags and (date) lines go.
import gzip, os, re, sys
src, dst = sys.argv[1], sys.argv[2]
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
def b64(s):
    v = 0
    for c in s:
        v = v * 64 + B64.index(c)
    return v
CATEGORY = re.compile(r"<[A-Za-z][A-Za-z0-9 ,.&/-]*>")
DATE = re.compile(r"^\(\d{4}-\d{2}-\d{2}\)$")
def write(name, docs):
    tmp = os.path.join(dst, name + ".txt.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(docs))
    os.replace(tmp, os.path.join(dst, name + ".txt"))
    print(f"{name}: {len(docs)} documents, {os.path.getsize(os.path.join(dst, name + '.txt'))} bytes")
heldout = []
for name in ("jargon", "foldoc"):
    text = gzip.open(os.path.join(src, name + ".dict.dz")).read()
    entries = set()
    for line in open(os.path.join(src, name + ".index"), encoding="utf-8"):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 3 or parts[0].startswith("00-database") or parts[0].startswith("00database"):
            continue
        entries.add((b64(parts[1]), b64(parts[2])))
    docs = []
    for off, length in sorted(entries):
        body = text[off:off + length].decode("utf-8", errors="replace")
        blocks = re.split(r"\n[ \t]*\n", body.strip("\n"))
        head = blocks[0].split("\n")[0].strip()
        paras = []
        for b in blocks[1:]:
            p = " ".join(l.strip() for l in b.split("\n") if l.strip())
            if name == "foldoc":
                p = CATEGORY.sub("", p).replace("{", "").replace("}", "")
                p = re.sub(r"\s+", " ", p).strip()
                if DATE.match(p):
                    continue
            if p:
                paras.append(p)
        if head and paras:
            docs.append(head + "\n" + "\n".join(paras) + "\n")
    # Every 50th entry is held out: never trained on, evaluated during training.
    heldout += docs[49::50]
    write(name, [d for i, d in enumerate(docs) if i % 50 != 49])
write("heldout", heldout)
PY
fi

vocab=$root/tests/data/bert-base-uncased-vocab.txt
[[ -f $vocab ]] || vocab=$root/../shared/data/bert-base-uncased-vocab.txt
shards=$out/shards-128
if [[ -x $lansbert ]]; then
  if [[ ! -f $shards/.done || $out/jargon.txt -nt $shards/.done || $out/foldoc.txt -nt $shards/.done ]]; then
    rm -f "$shards/.done"
    "$lansbert" prep --vocab "$vocab" --input "$out/jargon.txt" "$out/foldoc.txt" --out "$shards" \
      --seq-len 128 --max-pred 20
    touch "$shards/.done"
  else
    echo "shards up to date in $shards"
  fi
  held=$out/shards-128-heldout
  if [[ ! -f $held/.done || $out/heldout.txt -nt $held/.done ]]; then
    rm -f "$held/.done"
    "$lansbert" prep --vocab "$vocab" --input "$out/heldout.txt" --out "$held" --seq-len 128 --max-pred 20
    touch "$held/.done"
  else
    echo "held-out shards up to date in $held"
  fi
else
  echo "no lansbert binary at $lansbert: text only (build it, then rerun for shards)"
fi
