#!/usr/bin/env python3
"""Downloads a Wikipedia dump's article files for `lansbert prep`, each checked by its SHA-1.

    scripts/get-wikipedia.py [--wiki enwiki] [--date latest|YYYYMMDD] [--out data/wikipedia]
                             [--mirror https://dumps.wikimedia.org] [--parallel 2]

The files are those of the dump's `articlesdump` job in its dumpstatus.json: the split
`enwiki-YYYYMMDD-pages-articles1.xml-p1p41242.bz2` ... (27 for English, about 22 GB), so that
each can be prepared by its own `lansbert prep` on its own cores. `--date latest` takes the
newest dump whose articles job is done. A partial download is resumed (HTTP range requests);
a finished file whose SHA-1 matches is not fetched again; a file whose SHA-1 does not match is
removed and the script fails naming it. At the end it prints the prep commands to run.

Only the Python standard library is used. Wikimedia asks for at most 2 or 3 parallel
connections per client; mirrors (https://dumps.wikimedia.org/mirrors.html) are often faster:
pass one with --mirror (file:// URLs work too: the tests use a local mirror).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import sys
import urllib.error
import urllib.request

CHUNK = 1 << 20


def fail(message):
    print(f"get-wikipedia: {message}", file=sys.stderr)
    sys.exit(1)


def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.read()
    except (urllib.error.URLError, OSError) as e:
        raise RuntimeError(f"{url}: {e}") from e


def dump_status(mirror, wiki, date):
    url = f"{mirror}/{wiki}/{date}/dumpstatus.json"
    try:
        return json.loads(fetch(url))
    except json.JSONDecodeError as e:
        raise RuntimeError(f"{url}: not JSON ({e})") from e


def articles_job(status, job, where):
    j = status.get("jobs", {}).get(job)
    if not isinstance(j, dict) or not isinstance(j.get("files"), dict):
        raise RuntimeError(f"{where}: no '{job}' job with files")
    return j


def resolve_date(mirror, wiki, date, job):
    """The date asked for, or for 'latest' the newest whose job is done."""
    if date != "latest":
        if not re.fullmatch(r"\d{8}", date):
            fail(f"--date {date}: expected latest or YYYYMMDD")
        return date
    index = f"{mirror}/{wiki}/"
    if index.startswith("file://") and os.path.isdir(index[len("file://"):]):  # a local mirror
        listing = " ".join(os.listdir(index[len("file://"):]))
    else:
        listing = fetch(index).decode("utf-8", "replace")  # the server's HTML index
    dates = sorted(set(re.findall(r"(?<!\d)(\d{8})(?!\d)", listing)), reverse=True)
    for d in dates:
        try:
            if articles_job(dump_status(mirror, wiki, d), job, d).get("status") == "done":
                return d
        except RuntimeError as e:
            print(f"get-wikipedia: skipping {d}: {e}", file=sys.stderr)
    fail(f"no dump of {wiki} under {mirror}/{wiki}/ has a finished '{job}' job")


def sha1_of(path):
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def download(mirror, name, info, out_dir):
    """Fetches one file (resuming a .part), checks it, renames it into place. Returns a line."""
    final = os.path.join(out_dir, name)
    want_sha1, want_size = info.get("sha1"), info.get("size")
    if os.path.exists(final) and (want_sha1 is None or sha1_of(final) == want_sha1):
        return f"{name}: already here"
    part = final + ".part"
    url = mirror + info["url"] if info.get("url", "").startswith("/") else info.get("url") or ""
    if not url:
        raise RuntimeError(f"{name}: dumpstatus.json gives no url")
    have = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url)
    if have and url.startswith(("http://", "https://")):
        request.add_header("Range", f"bytes={have}-")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            resumed = have and getattr(r, "status", 200) == 206
            with open(part, "ab" if resumed else "wb") as f:
                for block in iter(lambda: r.read(CHUNK), b""):
                    f.write(block)
    except (urllib.error.URLError, OSError) as e:
        raise RuntimeError(f"{url}: {e} (rerun to resume from {part})") from e
    size = os.path.getsize(part)
    if want_size is not None and size != int(want_size):
        raise RuntimeError(f"{name}: {size} bytes, dumpstatus.json says {want_size} (rerun to resume)")
    if want_sha1 is not None:
        got = sha1_of(part)
        if got != want_sha1:
            os.remove(part)
            raise RuntimeError(f"{name}: SHA-1 {got}, dumpstatus.json says {want_sha1}: removed, rerun to fetch again")
    os.replace(part, final)
    return f"{name}: {size} bytes" + ("" if want_sha1 else " (no SHA-1 on this mirror: size checked only)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wiki", default="enwiki", help="the wiki's database name (enwiki, dewiki, simplewiki, ...)")
    p.add_argument("--date", default="latest", help="latest, or a dump date YYYYMMDD")
    p.add_argument("--mirror", default="https://dumps.wikimedia.org", help="the dumps' root URL")
    p.add_argument("--out", default="data/wikipedia", help="files go to OUT/WIKI-DATE/")
    p.add_argument("--parallel", type=int, default=2, help="downloads at once (Wikimedia asks for 2 or 3 at most)")
    p.add_argument("--job", default="articlesdump", help="the dumpstatus.json job whose files to fetch")
    a = p.parse_args()
    if not 1 <= a.parallel <= 16:
        fail(f"--parallel {a.parallel}: must be in [1, 16]")
    if not re.fullmatch(r"[a-z0-9_]+", a.wiki):
        fail(f"--wiki {a.wiki}: expected a database name such as enwiki")
    mirror = a.mirror.rstrip("/")
    try:
        date = resolve_date(mirror, a.wiki, a.date, a.job)
        job = articles_job(dump_status(mirror, a.wiki, date), a.job, f"{a.wiki} {date}")
    except RuntimeError as e:
        fail(str(e))
    if job.get("status") != "done":
        fail(f"{a.wiki} {date}: the '{a.job}' job is '{job.get('status')}', not done; pick another --date")
    files = {n: i for n, i in job["files"].items() if re.search(r"\.xml.*\.bz2$", n)}
    if not files:
        fail(f"{a.wiki} {date}: the '{a.job}' job lists no .xml...bz2 files")
    out_dir = os.path.join(a.out, f"{a.wiki}-{date}")
    os.makedirs(out_dir, exist_ok=True)
    total = sum(int(i.get("size", 0)) for i in files.values())
    print(f"get-wikipedia: {a.wiki} {date}: {len(files)} files, {total / 1e9:.1f} GB, into {out_dir}", file=sys.stderr)
    errors = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.parallel) as pool:
        jobs = {pool.submit(download, mirror, n, i, out_dir): n for n, i in sorted(files.items())}
        for done in concurrent.futures.as_completed(jobs):
            try:
                print(f"get-wikipedia: {done.result()}", file=sys.stderr)
            except RuntimeError as e:
                errors.append(str(e))
                print(f"get-wikipedia: {e}", file=sys.stderr)
    if errors:
        fail(f"{len(errors)} of {len(files)} files failed; rerun to resume")
    print(f"get-wikipedia: done. Prepare each file on its own (one prep per file, e.g. 4 at once), each with its "
          f"held-out set (0.5% of the articles, the same ones for both phases), then train on them together "
          f"(data.train: [shards/p1/*/shard-*.lbs], data.eval: [shards/p1-heldout/*/shard-*.lbs]; phase 2 "
          f"likewise with p2):", file=sys.stderr)
    for phase, seq, pred in (("p1", 128, 20), ("p2", 512, 80)):
        print(f"ls {out_dir}/*.bz2 | xargs -P 4 -I{{}} sh -c 'n=$(basename \"$1\" .bz2); lansbert prep --vocab vocab.txt "
              f"--input \"$1\" --out shards/{phase}/$n --heldout-out shards/{phase}-heldout/$n --heldout-fraction 0.005 "
              f"--seq-len {seq} --max-pred {pred} --threads 4 --no-progress' _ {{}}")

if __name__ == "__main__":
    main()
