#!/usr/bin/env python3
"""Checks a Hugging Face directory against lansbert with transformers: a `lansbert export`,
or a model transformers made (make_hf_model.py) that `lansbert eval` read.

Usage: check_hf_export.py HF_DIR BATCH_JSON
BATCH_JSON is `lansbert eval --dump-batch` output: one micro-batch and lansbert's eval-mode
losses on it. The directory must load as BertForPreTraining with no missing or unexpected keys
(the MLM decoder weight is tied to the word embeddings) and give the same total loss
(MLM + NSP) to 1e-5 relative, and closer than the other GELU form gives (config.json's
hidden_act is the form lansbert computed). Exits 77 (CTest skip) when torch/transformers are missing.
"""
import sys

try:
    import torch
    from transformers import BertForPreTraining
except ImportError as e:  # only a missing torch/transformers means "cannot check here"
    print(f"SKIP: torch/transformers not importable ({e})")
    sys.exit(77)
from hf_batch import load_batch  # noqa: E402 - ours: an error in it is a failure, not a skip

hf_dir, batch_path = sys.argv[1], sys.argv[2]
model, info = BertForPreTraining.from_pretrained(hf_dir, output_loading_info=True)
bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
if bad:
    print(f"FAIL: loading info {bad}")
    sys.exit(1)
model.eval()
b, inputs = load_batch(batch_path)


def hf_loss(m):
    with torch.no_grad():
        out = m(**inputs)
    return float(out.loss)


ours, theirs = b["total_loss"], hf_loss(model)
rel = abs(ours - theirs) / max(abs(ours), 1e-12)
print(f"lansbert loss {ours:.8f}, transformers loss {theirs:.8f}, relative difference {rel:.2e}")
# The config's hidden_act must be the GELU lansbert computed: the same weights under the other
# form (erf "gelu" <-> tanh "gelu_new") must land further from lansbert's loss.
other = "gelu" if model.config.hidden_act == "gelu_new" else "gelu_new"
swapped = BertForPreTraining.from_pretrained(hf_dir, hidden_act=other)
swapped.eval()
rel_other = abs(ours - hf_loss(swapped)) / max(abs(ours), 1e-12)
print(f"hidden_act {model.config.hidden_act}; with {other} instead: relative difference {rel_other:.2e}")
sys.exit(0 if rel <= 1e-5 and rel_other > 2 * rel else 1)
