#!/usr/bin/env python3
"""Compares lansbert's basic tokenization with Hugging Face tokenizers for every Unicode
scalar value (except U+000A, the line separator of the input).

Each code point c is tokenized in the line "x" + c + "x" by `lansbert tokenize --words`
and by tokenizers' BertNormalizer + BertPreTokenizer, uncased and cased; any difference
is printed. Needs `pip install tokenizers`. Usage:
    scripts/check-tokenizer-codepoints.py build/lansbert tests/data/bert-base-uncased-vocab.txt
"""
import subprocess
import sys

from tokenizers import normalizers, pre_tokenizers


def main():
    lansbert, vocab = sys.argv[1], sys.argv[2]
    cps = [c for c in range(0x110000) if c != 0x0A and not 0xD800 <= c <= 0xDFFF]
    text = "".join("x%sx\n" % chr(c) for c in cps).encode("utf-8")
    pre = pre_tokenizers.BertPreTokenizer()
    bad = 0
    for cased in (False, True):
        norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                          strip_accents=None, lowercase=not cased)
        cmd = [lansbert, "tokenize", "--vocab", vocab, "--words"] + (["--cased"] if cased else [])
        got = subprocess.run(cmd, input=text, capture_output=True, check=True).stdout
        lines = got.decode("utf-8").split("\n")
        for c, line in zip(cps, lines):
            s = "x%sx" % chr(c)
            want = " ".join(w for w, _ in pre.pre_tokenize_str(norm.normalize_str(s)))
            if line != want:
                bad += 1
                if bad <= 50:
                    print("U+%04X %s: lansbert %r, tokenizers %r" %
                          (c, "cased" if cased else "uncased", line, want))
    print("%d differences over %d code points x 2 modes" % (bad, len(cps)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
