#!/usr/bin/env python3
"""Writes the tokenizer golden files tests/data/golden/tokenizer_{uncased,cased}.jsonl:
one JSON object per line, {"text": ..., "ids": [...]}, the ids (no [CLS]/[SEP]) that
Hugging Face tokenizers' BertWordPieceTokenizer gives with the committed vocabulary.

The texts are fixed cases (accents, CJK, controls, odd whitespace, long words, scripts,
URLs, code) plus seeded random lines, so reruns produce the same files. Texts never contain
the special-token strings ([CLS] ...): tokenizers matches those as added tokens before
normalisation, which lansbert deliberately does not do for raw text.
Needs `pip install tokenizers`. Usage: scripts/make-tokenizer-golden.py
"""
import json
import os
import random
import unicodedata

from tokenizers import BertWordPieceTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "tests/data/bert-base-uncased-vocab.txt")
OUT = os.path.join(ROOT, "tests/data/golden")

FIXED = [
    "Hello, World!", "The quick brown fox jumps over the lazy dog.", "don't stop-believing...",
    "Café naïve résumé façade coöperate Ångström", "ÀÁÂÃÄÅ àáâãäå ÇçÑñ ŒœßẞĲĳ",
    "İstanbul ıi ǅ ǈ ǋ ﬁ ﬂ", "Σίσυφος ΟΔΥΣΣΕΥΣ ὈΔΥΣΣΕΎΣ", "Привет, мир! Ёлка", "مرحبا بالعالم، كيف حالك؟",
    "नमस्ते दुनिया। क़ ख़", "สวัสดีชาวโลก", "你好，世界！我爱北京天安门。", "日本語のテキスト、カタカナ、ひらがな",
    "한국어 텍스트 안녕하세요", "emoji 😀🎉👍🏽 👨‍👩‍👧 🇫🇷 ❤️", "tab\tseparated\tvalues",
    "nul\x00byte and bell\x07 and del\x7f", "zero\u200bwidth\u200cjoiner\u200d soft\u00adhyphen",
    "no\u00a0break\u3000ideographic\u2003em\u2028line\u2029para", "vt\x0bff\x0cnel\x85done",
    "cr\rlf\ncrlf\r\nend", "  leading and trailing   ", "", " ", "\t\n",
    "replacement \ufffd char", "private \ue000\uf8ff use", "bom \ufeff here",
    "12345 3.14159 1,000,000 -42 +7 1e10 0x1F ½ ² ٣ ४", "https://example.com/path?q=1&r=2#frag",
    "user@example.org, ftp://files.example.net/a_b-c.tar.gz", "int main() { return a[i] * 2; } // done",
    "def f(x): return x**2 + {'a': [1, 2]}", "SELECT * FROM t WHERE x <> 'y';", "$HOME/~user/.bashrc | grep -v '^#'",
    "a" * 99, "a" * 100, "a" * 101, "un" * 60, "x" + "é" * 99, "supercalifragilisticexpialidocious " * 3,
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "«quotes» „German“ ‘single’ “double” ‹angle›", "dash – em — minus − hyphen‐", "ellipsis… bullet• dagger†",
    "¿Qué? ¡Olé!", "mixed中文and English混合", "𠀀𠀁 extension B 𪜀 𫝀 𫠠 𬺰", "compat 豈 更 車",
    "combining e\u0301 a\u0308 o\u0302\u0323 n\u0303", "stacked a\u0323\u0301\u0308 q\u0307\u0323",
    "hangul jamo \u1100\u1161\u11a8", "Ⅻ ⅻ ℃ ℉ Ω K Å", "ＦＵＬＬＷＩＤＴＨ ｌａｔｉｎ １２３",
    "math 𝐀𝐁𝐂 𝔸𝔹 ∑∫√∞ ≠ ≤ ≥", "currency $ € £ ¥ ₹ ₿", "arrows ← → ↑ ↓ ⇒",
    "Ελληνικά: Ά Έ Ή Ί Ό Ύ Ώ ΐ ΰ", "Українська ї є ґ", "עברית שלום", "ქართული", "አማርኛ", "ᚠᚢᚦ runes",
    "tokenization tokenizer tokenizers tokenized", "unaffable unwanted running runner", "I'm you're it's",
    "U.S.A. e.g. i.e. etc.", "C++ C# F# .NET node.js", "#hashtag @mention", "ALL CAPS SENTENCE HERE",
    "unassigned \u0378 and \U0010ffff and \U000e0001", "surrogate-free \U0001f9ff \U0001fae0",
]


def random_lines(rng, count):
    pools = [
        "abcdefghijklmnopqrstuvwxyz     ", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿœšž",
        "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώ", "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
        "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह्ािीुूेैोौं",
        "กขคงจฉชซญดตถทนบปผพฟมยรลวสหอฮะาิีึืุูเแโใไ่้๊๋", "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
        "\t\u00a0\u3000\u2009\u200b\u00ad\x00\x07\x1b\x7f\u0085\ufeff", "😀😂🥰👍🎉🔥✨🚀❤️🇺🇸",
    ]
    known = [c for c in range(0x20, 0x30000)
             if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn"]
    known.remove(0x11938)  # NFD differs between tokenizers' and libutf8proc's Unicode data
    lines = []
    for i in range(count):
        if i % 3 == 2:  # random assigned code points from the whole space
            lines.append("".join(chr(rng.choice(known)) for _ in range(rng.randint(1, 40))))
            continue
        words = []
        for _ in range(rng.randint(1, 25)):
            pool = rng.choice(pools)
            words.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 12))))
        lines.append(rng.choice([" ", " ", " ", "", "\t", ", "]).join(words))
    return lines


def main():
    rng = random.Random(20240607)
    texts = FIXED + random_lines(rng, 400)
    specials = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    texts = [t for t in texts if not any(s.lower() in t.lower() for s in specials)]
    os.makedirs(OUT, exist_ok=True)
    for name, lower in (("uncased", True), ("cased", False)):
        tok = BertWordPieceTokenizer(VOCAB, lowercase=lower, strip_accents=None, clean_text=True,
                                     handle_chinese_chars=True)
        with open(os.path.join(OUT, "tokenizer_%s.jsonl" % name), "w", encoding="ascii") as f:
            for t in texts:
                ids = tok.encode(t, add_special_tokens=False).ids
                f.write(json.dumps({"text": t, "ids": ids}, ensure_ascii=True) + "\n")
    print("wrote %d lines per file to %s" % (len(texts), OUT))


if __name__ == "__main__":
    main()
