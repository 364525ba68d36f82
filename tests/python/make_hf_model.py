#!/usr/bin/env python3
"""Writes a BertForPreTraining that transformers itself made: random weights (seeded), sizes
unlike lansbert's presets, saved by save_pretrained as model.safetensors and config.json.

Usage: make_hf_model.py OUT_DIR
`lansbert eval` of it must give transformers' loss (check_hf_export.py): the check that eval
reads a Hugging Face directory it did not write. Exits 77 when torch/transformers are missing.
"""
import sys

try:
    import torch
    from transformers import BertConfig, BertForPreTraining
except ImportError as e:  # only a missing torch/transformers means "cannot check here"
    print(f"SKIP: torch/transformers not importable ({e})")
    sys.exit(77)

torch.manual_seed(7)
# 4 heads of 8, 3 layers, eps 1e-5, the tanh GELU: each differs from the tiny test model's, so
# a size or form eval did not take from config.json changes the loss. initializer_range 0.2
# makes the two GELU forms' losses differ clearly (check_hf_export.py tells them apart).
config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=48, max_position_embeddings=40, type_vocab_size=2,
                    layer_norm_eps=1e-5, hidden_act="gelu_new", initializer_range=0.2)
model = BertForPreTraining(config)
# Biases and LayerNorm weights start at 0 and 1; random ones make every tensor's load count.
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("bias") or "LayerNorm" in name:
            p.add_(0.1 * torch.randn_like(p))
model.save_pretrained(sys.argv[1], safe_serialization=True)
