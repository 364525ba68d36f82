#!/usr/bin/env python3
"""check_tensorboard.py TB_DIR METRICS_JSONL: TensorBoard's own reader (EventAccumulator, which
drops the points a crashed run logged past its checkpoint when the next run's file starts with
a SessionLog START) sees in TB_DIR each step's train and eval values of the metrics file once,
the last record of a step winning as a resumed run's does. Exit 0 when all agree."""
import json
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

tb_dir, metrics = sys.argv[1], sys.argv[2]
acc = EventAccumulator(tb_dir, size_guidance={"scalars": 0})
acc.Reload()
want = {}  # (tag, step) -> value, the last record of a step winning
for line in open(metrics):
    r = json.loads(line)
    prefix = "eval" if r.get("type") == "eval" else "train"
    for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"):
        want[(f"{prefix}/{key}", r["step"])] = r[key]
    if prefix == "train":
        want[("train/lr", r["step"])] = r["lr"]
        want[("speed/tokens_per_s", r["step"])] = r["tokens_per_s"]
        want[("data/fill", r["step"])] = r["fill"]
        for key in ("trust_ratio", "trust_ratio_grad"):  # LANS writes both, LAMB the first
            for stat in ("min", "median", "max") if key in r else ():
                want[(f"optimizer/{key}_{stat}", r["step"])] = r[key][stat]
fail = 0
for tag in sorted({t for t, _ in want}):
    got = {}
    for e in acc.Scalars(tag):
        if e.step in got:
            print(f"FAIL: {tag} has step {e.step} twice")
            fail = 1
        got[e.step] = e.value
    steps = sorted(s for t, s in want if t == tag)
    if sorted(got) != steps:
        print(f"FAIL: {tag}: steps {sorted(got)}, the metrics file has {steps}")
        fail = 1
        continue
    for s in steps:
        if not math.isclose(got[s], want[(tag, s)], rel_tol=1e-6, abs_tol=1e-30):
            print(f"FAIL: {tag} at step {s}: {got[s]} in TensorBoard, {want[(tag, s)]} in the metrics file")
            fail = 1
print(f"{len(want)} values of {len({t for t, _ in want})} tags checked")
sys.exit(fail)
