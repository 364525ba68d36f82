"""A `lansbert eval --dump-batch` JSON file as the keyword arguments of transformers'
BertForPreTraining: the masked slots become per-position labels (-100 where nothing is
masked, as transformers' loss ignores them). Shared by the checks that score lansbert's batch
with transformers (check_hf_export.py, check_torch_step.py)."""
import json

import torch


def load_batch(path):
    """(the JSON object, the model's keyword arguments with labels)."""
    b = json.load(open(path))
    n, s, p = b["batch"], b["seq_len"], b["max_pred"]
    labels = torch.full((n, s), -100, dtype=torch.long)
    pos = torch.tensor(b["masked_positions"]).view(n, p)
    mids = torch.tensor(b["masked_ids"]).view(n, p)
    for r in range(n):
        for k in range(p):
            if mids[r, k] >= 0:  # -1: an empty slot
                labels[r, pos[r, k]] = mids[r, k]
    inputs = dict(input_ids=torch.tensor(b["input_ids"]).view(n, s),
                  token_type_ids=torch.tensor(b["segment_ids"]).view(n, s),
                  attention_mask=torch.tensor(b["input_mask"]).view(n, s), labels=labels,
                  next_sentence_label=torch.tensor(b["nsp_labels"]))
    return b, inputs
