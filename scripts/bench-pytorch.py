#!/usr/bin/python3
"""The same BERT pretraining forward+backward as `lansbert bench`, in PyTorch, for a
side-by-side comparison on the CPU (Debian's python3-torch).

The model is written here with torch.nn (post-LN encoder layers with erf GELU, LayerNorm
eps 1e-12, dropout 0.1, MLM head at the masked slots with the decoder tied to the word
embeddings, pooler + NSP head), so no download is needed; its FLOP count equals lansbert's
(include/lansbert/model/flops.h). Prints one JSON line per run, with the same fields.

  /usr/bin/python3 scripts/bench-pytorch.py --model bert-mini --seq-len 128 --batch 8 --threads 2
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # layers, hidden, heads, intermediate (lansbert's presets)
    "bert-tiny": (2, 128, 2, 512),
    "bert-mini": (4, 256, 4, 1024),
    "bert-small": (4, 512, 8, 2048),
    "bert-medium": (8, 512, 8, 2048),
    "bert-base": (12, 768, 12, 3072),
    "bert-large": (24, 1024, 16, 4096),
}
VOCAB, POSITIONS, TYPES = 30522, 512, 2


class Bert(nn.Module):
    def __init__(self, layers, hidden, heads, inter, dropout=0.1):
        super().__init__()
        self.word = nn.Embedding(VOCAB, hidden)
        self.pos = nn.Embedding(POSITIONS, hidden)
        self.token_type = nn.Embedding(TYPES, hidden)
        self.emb_ln = nn.LayerNorm(hidden, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(
            nn.TransformerEncoderLayer(hidden, heads, inter, dropout, activation="gelu",
                                       layer_norm_eps=1e-12, batch_first=True, norm_first=False)
            for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.nsp = nn.Linear(hidden, 2)
        self.mlm_dense = nn.Linear(hidden, hidden)
        self.mlm_ln = nn.LayerNorm(hidden, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(VOCAB))
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids, seg, mask, mpos, mids, nsp_labels):
        b, s = ids.shape
        positions = torch.arange(s).unsqueeze(0).expand(b, s)
        x = self.drop(self.emb_ln(self.word(ids) + self.pos(positions) + self.token_type(seg)))
        pad = mask == 0
        for layer in self.encoder:
            x = layer(x, src_key_padding_mask=pad)
        gathered = x.gather(1, mpos.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        t = self.mlm_ln(F.gelu(self.mlm_dense(gathered)))
        logits = t @ self.word.weight.t() + self.mlm_bias
        mlm = F.cross_entropy(logits.reshape(-1, VOCAB), mids.reshape(-1), ignore_index=-1)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        nsp = F.cross_entropy(self.nsp(pooled), nsp_labels)
        return mlm + nsp


def train_flops(layers, h, inter, b, s, p):
    layer = 8 * s * h * h + 4 * s * s * h + 4 * s * h * inter
    heads = 2 * p * h * h + 2 * p * h * VOCAB + 2 * h * h + 4 * h
    return 3 * b * (layers * layer + heads)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bert-base", choices=PRESETS)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-pred", type=int, default=-1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    layers, hidden, heads, inter = PRESETS[args.model]
    b, s = args.batch, args.seq_len
    p = args.max_pred if args.max_pred > 0 else max(1, (s * 20 + 127) // 128)
    model = Bert(layers, hidden, heads, inter).train()
    ids = torch.randint(1000, VOCAB, (b, s))
    ids[:, 0] = 101
    seg = (torch.arange(s) >= s // 2).long().unsqueeze(0).expand(b, s).contiguous()
    mask = torch.ones(b, s, dtype=torch.long)
    mpos = torch.tensor([[1 + i * (s - 2) // p for i in range(p)]] * b)
    mids = torch.randint(1000, VOCAB, (b, p))
    nsp = torch.arange(b) % 2
    fwd, bwd = [], []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        loss = model(ids, seg, mask, mpos, mids, nsp)
        t1 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss.backward()
        t2 = time.perf_counter()
        if i >= args.warmup:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    tf, tb = statistics.median(fwd), statistics.median(bwd)
    step = tf + tb
    print(json.dumps({
        "model": args.model, "backend": "pytorch-cpu", "torch": torch.__version__,
        "threads": torch.get_num_threads(), "batch": b, "seq_len": s, "max_pred": p,
        "forward_ms": round(tf * 1e3, 3), "backward_ms": round(tb * 1e3, 3),
        "step_ms": round(step * 1e3, 3), "tokens_per_s": round(b * s / step, 1),
        "sequences_per_s": round(b / step, 2),
        "gflops": round(train_flops(layers, hidden, inter, b, s, p) / step / 1e9, 2),
        "loss": round(loss.item(), 5)}))


if __name__ == "__main__":
    main()
