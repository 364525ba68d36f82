#!/usr/bin/env python3
"""Checks a `lansbert export --dtype bf16|fp16` directory against the fp32 export of the same
checkpoint, with Hugging Face transformers.

Usage: check_hf_dtype.py HF_FP32_DIR HF_HALF_DIR DTYPE   (DTYPE: bf16 or fp16)
The half export must load as BertForPreTraining with no missing or unexpected keys, store
its tensors in DTYPE (safetensors header), name that dtype in config.json's torch_dtype, and
hold exactly torch's round-to-nearest-even rounding of every fp32 weight. Exits 77 (CTest
skip) when torch/transformers are missing.
"""
import json
import struct
import sys

try:
    import torch
    from transformers import BertForPreTraining
except ImportError as e:  # only a missing torch/transformers means "cannot check here"
    print(f"SKIP: torch/transformers not importable ({e})")
    sys.exit(77)

full_dir, half_dir, dtype = sys.argv[1], sys.argv[2], sys.argv[3]
torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
st_name = {"bf16": "BF16", "fp16": "F16"}[dtype]
fail = False

with open(f"{half_dir}/model.safetensors", "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
stored = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
if stored != {st_name}:
    print(f"FAIL: tensors stored as {stored}, expected {st_name}")
    fail = True
config = json.load(open(f"{half_dir}/config.json"))
if config.get("torch_dtype") != str(torch_dtype).replace("torch.", ""):
    print(f"FAIL: config.json torch_dtype {config.get('torch_dtype')!r}")
    fail = True

full = BertForPreTraining.from_pretrained(full_dir)
half, info = BertForPreTraining.from_pretrained(half_dir, output_loading_info=True, torch_dtype=torch_dtype)
bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
if bad:
    print(f"FAIL: loading info {bad}")
    fail = True
halves = dict(half.state_dict())
checked = 0
for name, w in full.state_dict().items():
    h = halves[name]
    if h.dtype != torch_dtype:
        print(f"FAIL: {name} loaded as {h.dtype}")
        fail = True
    elif not torch.equal(w.to(torch_dtype), h):
        diff = (w.to(torch_dtype).float() - h.float()).abs().max().item()
        print(f"FAIL: {name} is not the {dtype} rounding of the fp32 export (max difference {diff:.3g})")
        fail = True
    checked += 1
print(f"{dtype} export: {checked} tensors, each the round-to-nearest {dtype} of the fp32 export's")
sys.exit(1 if fail else 0)
