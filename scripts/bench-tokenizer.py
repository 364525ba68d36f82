#!/usr/bin/env python3
"""Times `lansbert tokenize` against Hugging Face tokenizers (one thread) on the same text
and vocabulary and reports MB/s of input per core: input bytes over CPU time (user + system),
which stays honest on a loaded machine, and over wall time. Both produce ids with [CLS]/[SEP] for
every line; lansbert's time includes reading the file and printing the ids, tokenizers'
time only encode_batch (the most favourable to it). Best of --repeat runs each.
Usage: scripts/bench-tokenizer.py --lansbert build/lansbert --text /tmp/foldoc.txt
"""
import argparse
import os
import resource
import subprocess
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import BertWordPieceTokenizer  # noqa: E402


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser()
    p.add_argument("--lansbert", default=os.path.join(root, "build/lansbert"))
    p.add_argument("--vocab", default=os.path.join(root, "tests/data/bert-base-uncased-vocab.txt"))
    p.add_argument("--text", required=True)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    data = open(a.text, "rb").read()
    mb = len(data) / 1e6
    lines = data.decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    def child_cpu():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    best_l = cpu_l = 1e9
    out = None
    for _ in range(a.repeat):
        t0, c0 = time.perf_counter(), child_cpu()
        r = subprocess.run(["taskset", "-c", "0", a.lansbert, "tokenize", "--vocab", a.vocab, a.text],
                           capture_output=True, check=True)
        best_l = min(best_l, time.perf_counter() - t0)
        cpu_l = min(cpu_l, child_cpu() - c0)
        out = r.stdout
    tok = BertWordPieceTokenizer(a.vocab, lowercase=True)
    best_h = cpu_h = 1e9
    enc = None
    for _ in range(a.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        enc = tok.encode_batch(lines)
        best_h = min(best_h, time.perf_counter() - t0)
        cpu_h = min(cpu_h, time.process_time() - c0)
    got = out.decode().split("\n")[:-1]
    same = sum(1 for g, e in zip(got, enc) if g == " ".join(map(str, e.ids)))
    print("text: %s, %.2f MB, %d lines" % (a.text, mb, len(lines)))
    print("lansbert tokenize (pinned to 1 core, incl. vocab load and I/O): "
          "cpu %.3f s = %.1f MB/s per core; wall %.3f s = %.1f MB/s" %
          (cpu_l, mb / cpu_l, best_l, mb / best_l))
    print("tokenizers %s encode_batch (RAYON_NUM_THREADS=1): "
          "cpu %.3f s = %.1f MB/s per core; wall %.3f s = %.1f MB/s" %
          (__import__("tokenizers").__version__, cpu_h, mb / cpu_h, best_h, mb / best_h))
    print("identical id lines: %d of %d" % (same, len(lines)))


if __name__ == "__main__":
    main()
