#!/usr/bin/env python3
"""Checks `lansbert train`'s first two updates against PyTorch: the loss and the gradients from
transformers' BertForPreTraining (autograd, float64), the update written here from the optimizer
spec (LANS, LAMB, AdamW; docs/optimizers.md states the same rules), never from lansbert's code.

Usage: check_torch_step.py make-model OUT_DIR   (the run's initial weights)
       check_torch_step.py --hf0 DIR --hf1 DIR --hf2 DIR --batch JSON --metrics JSONL
                           --optimizer lans|lamb|adamw --weight-decay WD [--trust-ratio-on-excluded]
HF0 is the Hugging Face directory the run started from (--init-from), HF1 and HF2 the exports of
its checkpoints after updates 1 and 2, BATCH the `lansbert eval --dump-batch` of HF0 on the
run's whole global batch (one micro-batch: the batch's order then does not matter), METRICS
the run's metrics.jsonl (logging.every_steps 1): the lr each update used is taken from it.
b1, b2, eps and max_grad_norm are the spec's defaults (0.9, 0.999, 1e-6, 1.0), which the run
must have used too; optimizer.no_decay is lansbert's default (bias, LayerNorm gamma and beta).

Checks:
- lansbert's logged loss before each update equals transformers' on the batch (1e-5 relative),
  and its logged gradient norm equals the global norm of the autograd gradient (1e-5);
- per tensor, ||delta_ref - delta_lansbert|| / ||delta_lansbert|| <= --bound (default 3e-4)
  for update 1 (from HF0) and update 2 (from lansbert's weights after update 1, with this
  script's moments carried); the attention key biases, whose exact gradient is 0, by the size
  of their step only (see NOISE);
- the metrics' trust-ratio summaries (min, median, max) equal this script's ratios (1e-4);
- each perturbation of the reference (unless --no-mutations) exceeds the bound on some tensor:
  the comparison tells a wrong rule from a right one.
The bound: lansbert computes in fp32, this script in float64 from the same fp32 weights. Its
gradients differ from the float64 ones by ~1e-7 relative (the logged norm agrees to ~5e-8),
the stored weights round to 6e-8 of |p|, about 3e-6 of a step of 0.02 |p|, and dividing by
sqrt(vhat) + eps amplifies the error of a gradient's small elements (near eps, an element's
update moves by up to 1/(4 eps) times its gradient's error): measured, 1.5e-5 to 4e-5 (LANS;
the spread is OpenBLAS's kernel choice, OPENBLAS_CORETYPE) and 8e-6 to 1.8e-5 (LAMB, AdamW) at
most. The bound, 3e-4, leaves room for other CPUs' BLAS kernels; the smallest effect of a
perturbation is 3.2e-3 (LANS's ratio without the decay term), 10 times the bound.
The reference is float64 autograd through transformers with one change: the [PAD] row of the
word embeddings gets its lookup gradient (see load()).
Exit 0: agreement; 1: a disagreement (printed); 77 (CTest skip): no torch/transformers.
"""
import argparse
import json
import math
import sys

try:
    import torch
    from transformers import BertForPreTraining
except ImportError as e:  # only a missing torch/transformers means "cannot check here"
    print(f"SKIP: torch/transformers not importable ({e})")
    sys.exit(77)
from hf_batch import load_batch  # noqa: E402 - ours: an error in it is a failure, not a skip

torch.set_num_threads(2)

if len(sys.argv) == 3 and sys.argv[1] == "make-model":
    # The run's initial weights, made by transformers (seeded): sized for make_train_test_data's
    # 64-token vocab and 32-token sequences, lansbert's LayerNorm eps (1e-12) and erf GELU;
    # random biases and LayerNorm weights (they start at 0 and 1) so that every rule's terms
    # show in every tensor. initializer_range 0.2: weights of norm comparable to the biases'.
    from transformers import BertConfig
    torch.manual_seed(11)
    model = BertForPreTraining(BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
        max_position_embeddings=32, type_vocab_size=2, hidden_act="gelu", initializer_range=0.2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    with torch.no_grad():
        for _, mod in model.named_modules():
            for pn, p in mod.named_parameters(recurse=False):
                if pn == "bias" or type(mod).__name__ == "LayerNorm":
                    p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(sys.argv[2], safe_serialization=True)
    sys.exit(0)

ap = argparse.ArgumentParser()
for k in ("hf0", "hf1", "hf2", "batch", "metrics"):
    ap.add_argument("--" + k, required=True)
ap.add_argument("--optimizer", required=True, choices=["lans", "lamb", "adamw"])
ap.add_argument("--weight-decay", type=float, required=True)
ap.add_argument("--trust-ratio-on-excluded", action="store_true")
ap.add_argument("--bound", type=float, default=3e-4)
ap.add_argument("--no-mutations", action="store_true")
args = ap.parse_args()

B1, B2, EPS, MAX_GRAD_NORM = 0.9, 0.999, 1e-6, 1.0
NO_DECAY = {"bias", "layernorm_gamma", "layernorm_beta"}


def load(d):
    m, info = BertForPreTraining.from_pretrained(d, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        sys.exit(f"FAIL: loading {d}: {bad}")
    m.eval()  # no dropout (the run's model.*_dropout are 0 too)
    # transformers' nn.Embedding(padding_idx=pad_token_id) gives the [PAD] row no gradient from
    # the lookup, even where [PAD] is a real input (a masked slot's random replacement: the test
    # data has one); Google's BERT, and lansbert, have no such rule. The forward is the same.
    m.bert.embeddings.word_embeddings.padding_idx = None
    return m.double()


def roles(model):
    """Each parameter's role, by the module that owns it (never by its name)."""
    out = {}
    by_id = {id(p): n for n, p in model.named_parameters()}  # tied parameters listed once
    for _, mod in model.named_modules():
        for pn, p in mod.named_parameters(recurse=False):
            t = type(mod).__name__
            if t == "Embedding" and pn == "weight":
                r = "embedding"
            elif t == "LayerNorm":
                r = "layernorm_gamma" if pn == "weight" else "layernorm_beta"
            elif pn == "bias":  # Linear's, and BertLMPredictionHead's output bias
                r = "bias"
            elif t == "Linear" and pn == "weight":
                r = "weight"
            else:
                sys.exit(f"FAIL: no role for {t}.{pn}")
            out.setdefault(by_id[id(p)], r)  # the tied decoder weight: the word embeddings' role
    return out


b, inputs = load_batch(args.batch)


def loss_and_grads(model):
    """transformers' total loss (MLM mean over the masked tokens + NSP mean) and its gradient;
    the word embeddings' gradient also split into the lookup's and the tied decoder's parts."""
    model.zero_grad()
    emb = model.bert.embeddings.word_embeddings
    seen = {}

    def keep(mod, inp, out):  # returns None: the output is left as it is
        out.retain_grad()
        seen["out"] = out

    h = emb.register_forward_hook(keep)
    out = model(**inputs)
    out.loss.backward()
    h.remove()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    lookup = torch.zeros_like(emb.weight).index_add_(0, inputs["input_ids"].reshape(-1), seen["out"].grad.reshape(-1, emb.weight.shape[1]))
    # The two terms of out.loss, as transformers computes them (ignore_index -100: the empty slots).
    ce = torch.nn.functional.cross_entropy
    with torch.no_grad():
        mlm = float(ce(out.prediction_logits.view(-1, out.prediction_logits.shape[-1]), inputs["labels"].view(-1)))
        nsp = float(ce(out.seq_relationship_logits, inputs["next_sentence_label"]))
    if abs(mlm + nsp - float(out.loss)) > 1e-12 * abs(float(out.loss)):
        sys.exit(f"FAIL: transformers' loss {float(out.loss)} is not MLM {mlm} + NSP {nsp}")
    return {"loss": float(out.loss), "mlm_loss": mlm, "nsp_loss": nsp}, grads, lookup


metrics = [json.loads(line) for line in open(args.metrics) if line.strip()]
train = {m["step"]: m for m in metrics if "type" not in m}
if 1 not in train or 2 not in train:
    sys.exit("FAIL: the metrics file has no records of steps 1 and 2 (logging.every_steps 1)")
lrs = [train[1]["lr"], train[2]["lr"]]
if not all(lr > 0 for lr in lrs):
    sys.exit(f"FAIL: the lr of the two updates must be non-zero to test them: {lrs}")

m0, m1, m2 = load(args.hf0), load(args.hf1), load(args.hf2)
role = roles(m0)
names = [n for n, _ in m0.named_parameters()]
p0 = {n: p.detach().clone() for n, p in m0.named_parameters()}
p1 = {n: p.detach().clone() for n, p in m1.named_parameters()}
p2 = {n: p.detach().clone() for n, p in m2.named_parameters()}
assert m0.cls.predictions.decoder.weight is m0.bert.embeddings.word_embeddings.weight
WORD = "bert.embeddings.word_embeddings.weight"
ok = True

# Loss and gradient norm: the run's forward and backward on this batch.
loss0, g0, look0 = loss_and_grads(m0)
loss1, g1, look1 = loss_and_grads(m1)
# The attention key biases: q.(k + b) adds q.b to every key's score of a query, which the
# softmax removes, so their gradient is 0 in exact arithmetic and what either side computes is
# rounding noise (float64 here, float32 in lansbert). LANS, and LAMB's trust ratio, scale any
# non-zero gradient to a full step (the ratio rescales the update to lr*||p||), so these blocks
# move by a step of determined size in a noise direction: only the size is compared.
NOISE = set()
for mod_name, mod in m0.named_modules():
    if type(mod).__name__ == "BertSelfAttention":
        NOISE.add(mod_name + ".key.bias")
gnorm0 = math.sqrt(sum(float((x * x).sum()) for x in g0.values()))
for n in NOISE:
    if n not in role or float(g0[n].norm()) > 1e-12 * gnorm0:
        sys.exit(f"FAIL: {n}: expected a parameter with a zero gradient, the gradient's norm is "
                 f"{float(g0[n].norm()) if n in g0 else 'absent'}")

# The loss: lansbert's total is MLM (mean over the masked tokens of the global batch) + NSP
# (mean over its sequences), each term to 1e-5 relative; the gradient's global norm too.
for step, ours, g in ((1, loss0, g0), (2, loss1, g1)):
    rec = train[step]
    gn = math.sqrt(sum(float((x * x).sum()) for x in g.values()))
    rels = {k: abs(rec[k] - ours[k]) / abs(ours[k]) for k in ours}
    rels["grad_norm"] = abs(rec["grad_norm"] - gn) / gn
    print(f"step {step}: lr {rec['lr']:.6g}; loss lansbert {rec['loss']:.8f} transformers {ours['loss']:.8f}; "
          f"grad norm lansbert {rec['grad_norm']:.8f} autograd {gn:.8f}; relative differences "
          + ", ".join(f"{k} {v:.1e}" for k, v in rels.items()))
    if max(rels.values()) > 1e-5:
        print(f"FAIL: step {step}: the loss or the gradient norm differs")
        ok = False


def update(p, g, state, t, lr, mut=frozenset(), look=None):
    """One update of every block. p, g: name -> float64 tensor (g is not modified). state holds
    m and v per block. Returns (new params, {name: (r_m, r_g) or (r,) or ()} applied ratios)."""
    g = dict(g)
    if "embedding_grad_only" in mut:  # the tied decoder's gradient dropped
        g[WORD] = look
    if args.optimizer in ("lamb", "adamw") and "no_clip" not in mut:
        G = math.sqrt(sum(float((x * x).sum()) for x in g.values()))
        if MAX_GRAD_NORM > 0 and G > MAX_GRAD_NORM:
            g = {n: x / (G / MAX_GRAD_NORM) for n, x in g.items()}
    bc1 = 1.0 if "no_bias_correction" in mut else 1 - B1 ** t
    bc2 = 1.0 if "no_bias_correction" in mut else 1 - B2 ** t

    def denom(v):
        if "eps_inside_sqrt" in mut:
            return torch.sqrt(v / bc2 + EPS)
        return torch.sqrt(v / bc2) + EPS

    def ratio(pn, u):
        un = float(u.norm())
        return 1.0 if pn == 0 or un == 0 else pn / un

    new, ratios = {}, {}
    for n in names:
        x, gr = p[n], g[n]
        excluded = role[n] in NO_DECAY
        if "wd_on_layernorm" in mut and role[n].startswith("layernorm"):
            excluded = False
        if "no_wd_on_embeddings" in mut and role[n] == "embedding":
            excluded = True
        wd = 0.0 if excluded else args.weight_decay
        pn = float(x.norm())
        m, v = state.setdefault(n, (torch.zeros_like(x), torch.zeros_like(x)))
        if args.optimizer == "lans":
            gn = float(gr.norm())
            gh = gr / (gn + EPS) if gn != 0 else gr
            mg = gr if "moments_of_raw_grad" in mut else gh
            m = B1 * m + (1 - B1) * mg
            v = B2 * v + (1 - B2) * mg * mg
            d = denom(v)
            u_m = (m / bc1) / d + wd * x
            u_g = gh / d + wd * x
            if "ratio_without_wd" in mut:
                r_m, r_g = ratio(pn, (m / bc1) / d), ratio(pn, gh / d)
            else:
                r_m, r_g = ratio(pn, u_m), ratio(pn, u_g)
            if "one_ratio" in mut:
                r_g = r_m
            new[n] = x - lr * B1 * r_m * u_m - lr * (1 - B1) * r_g * u_g
            ratios[n] = (r_m, r_g)
        else:
            m = B1 * m + (1 - B1) * gr
            v = B2 * v + (1 - B2) * gr * gr
            adam = (m / bc1) / denom(v)
            u = adam + wd * x
            if args.optimizer == "adamw":
                new[n], ratios[n] = x - lr * u, ()
            else:
                on = wd != 0 or args.trust_ratio_on_excluded
                if "flip_trust_ratio_on_excluded" in mut and excluded:
                    on = not on
                r = (ratio(pn, adam) if "ratio_without_wd" in mut else ratio(pn, u)) if on else 1.0
                new[n] = x - lr * r * u
                ratios[n] = (r,) if on else ()
        state[n] = (m, v)
    return new, ratios


def compare(ref1, ref2, quiet):
    """Largest per-tensor relative difference of the two updates' deltas, and where. The blocks
    of NOISE are held to the size of their step instead (see above)."""
    worst = (0.0, "", 0)
    for step, base, ref, lb, lr in ((1, p0, ref1, p1, lrs[0]), (2, p1, ref2, p2, lrs[1])):
        for n in names:
            d_lb = lb[n] - base[n]
            d_ref = ref[n] - base[n]
            den = float(d_lb.norm())
            if n in NOISE:
                full = lr * float(base[n].norm())  # lr*||p||: a step the trust ratio scaled
                if args.optimizer == "lans" and step == 1 or args.optimizer == "lamb" and args.trust_ratio_on_excluded:
                    # (LANS's two directions are one on the first update: mhat = gh there.)
                    rel, what = abs(den - full) / full, f"||delta|| {den:.6e}, lr*||p|| {full:.6e}"
                elif args.optimizer == "lans":
                    rel, what = max(0.0, den - full) / full, f"||delta|| {den:.6e} > lr*||p|| {full:.6e}"
                else:  # Adam's |mhat / (sqrt(vhat) + eps)| < 1 per element
                    cap = lr * math.sqrt(d_lb.numel())
                    rel, what = max(0.0, den - cap) / cap, f"||delta|| {den:.6e} > lr*sqrt(n) {cap:.6e}"
            else:
                rel = float((d_ref - d_lb).norm()) / den if den > 0 else float(d_ref.norm())
                what = f"||delta lansbert|| {den:.4e}, ||p|| {float(base[n].norm()):.4e}"
            if not quiet and rel > args.bound:
                print(f"  step {step} {n}: relative difference {rel:.3e} ({what})")
            if rel > worst[0]:
                worst = (rel, n, step)
    return worst


def run(mut=frozenset()):
    state = {}
    ref1, rat1 = update(p0, g0, state, 1, lrs[0], mut, look0)
    # Update 2 starts from lansbert's weights after update 1 (the gradient of the run's own
    # forward), with this script's moments.
    ref2, rat2 = update(p1, g1, state, 2, lrs[1], mut, look1)
    return ref1, ref2, (rat1, rat2)


ref1, ref2, rats = run()
worst = compare(ref1, ref2, quiet=False)
print(f"{args.optimizer}{' trust_ratio_on_excluded' if args.trust_ratio_on_excluded else ''} "
      f"wd {args.weight_decay}: largest relative difference of a tensor's update {worst[0]:.2e} "
      f"({worst[1]}, update {worst[2]}; bound {args.bound:g})")
if worst[0] > args.bound:
    print("FAIL: the updates differ")
    ok = False

# The trust ratios lansbert logged (a summary over the tensors) against this script's. A NOISE
# block's ratio depends on its noise: where the logged extreme is one, only its side is checked,
# and the median is checked where no such block is in the summary.
for step, rat in ((1, rats[0]), (2, rats[1])):
    for key, i in (("trust_ratio", 0), ("trust_ratio_grad", 1)):
        have = {n: r[i] for n, r in rat.items() if len(r) > i}
        clean = sorted(v for n, v in have.items() if n not in NOISE)
        rec = train[step].get(key)
        if not have or rec is None:
            if bool(have) != (rec is not None):
                print(f"FAIL: step {step}: {key} {'absent from' if have else 'in'} the metrics, "
                      f"{'but' if have else 'but not'} applied by the rule")
                ok = False
            continue
        checks = []
        for k, ext in (("min", clean[0]), ("max", clean[-1])):
            t = rec[k + "_tensor"]
            if t in NOISE:
                checks.append((k, rec[k] <= ext if k == "min" else rec[k] >= ext, ext))
            else:
                checks.append((k, t in have and abs(have[t] - rec[k]) <= 1e-4 * abs(rec[k])
                               and abs(ext - rec[k]) <= 1e-4 * abs(rec[k]), have.get(t)))
        if not NOISE & set(have):
            med = clean[(len(clean) - 1) // 2]
            checks.append(("median", abs(med - rec["median"]) <= 1e-4 * abs(med), med))
        print(f"step {step}: {key} (min, median, max) lansbert ({rec['min']:.6g} {rec['min_tensor']}, "
              f"{rec['median']:.6g}, {rec['max']:.6g} {rec['max_tensor']}): "
              + ", ".join(f"{k} {'agrees' if good else 'DIFFERS'}" for k, good, _ in checks))
        for k, good, v in checks:
            if not good:
                print(f"FAIL: step {step}: {key}.{k} lansbert {rec[k]:.8g} ({rec.get(k + '_tensor', '')}), ours {v}")
                ok = False

if not args.no_mutations:
    muts = ["eps_inside_sqrt", "no_bias_correction", "wd_on_layernorm", "no_wd_on_embeddings",
            "embedding_grad_only"]
    if args.optimizer != "adamw":
        muts.append("ratio_without_wd")
    if args.optimizer == "lans":
        muts += ["one_ratio", "moments_of_raw_grad"]
    if args.optimizer != "lans":
        muts.append("no_clip")
    if args.optimizer == "lamb":
        muts.append("flip_trust_ratio_on_excluded")
    for mu in muts:
        r1, r2, _ = run(frozenset([mu]))
        w = compare(r1, r2, quiet=True)
        caught = w[0] > args.bound
        print(f"  mutation {mu}: largest relative difference {w[0]:.2e} ({w[1]}, update {w[2]}): "
              f"{'caught' if caught else 'NOT CAUGHT'}")
        if not caught:
            ok = False

print("OK" if ok else "FAIL")
sys.exit(0 if ok else 1)
