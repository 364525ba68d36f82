#!/usr/bin/python3
"""Draws loss, accuracy and learning-rate PNGs from a lansbert metrics file (JSON lines).

Usage: scripts/plot-metrics.py METRICS_JSONL [OUT_DIR]   (default OUT_DIR: beside the file)
Writes loss.png, accuracy.png and lr.png, trust.png (the layer-wise trust ratios' min,
median and max, log scale) when the records carry them (LANS, LAMB), and noise.png (the
gradient noise scale B_noise beside the global batch, log scale) when they carry it
(logging.noise_scale). Uses Debian's matplotlib (python3-matplotlib).
"""
import json
import os
import sys


def import_pyplot():
    """matplotlib.pyplot on the Agg backend (files, no display), or None after one line on
    stderr saying what to install: a bare ImportError traceback does not say it is a Debian
    package. Imported here, not at the top, so that the usage text needs no matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot-metrics.py: cannot import matplotlib ({e}); install it with: "
              "apt-get install python3-matplotlib", file=sys.stderr)
        return None
    return plt


def read_records(path):
    """The JSON records of a metrics file. A line that is not one (the torn tail of a run that
    died on a full disk) is named on stderr and skipped, so the runs around it still plot."""
    records = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                record = None
                why = e.msg
            else:
                why = "not a record with a step"
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                print(f"{path}:{number}: skipped: {why}: {line.strip()[:80]}", file=sys.stderr)
                continue
            records.append(record)
    return records


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(path))
    # The file is read before matplotlib is looked for: what is wrong with it is said first.
    try:
        records = read_records(path)
    except OSError as e:
        print(f"{path}: cannot read: {e.strerror}", file=sys.stderr)
        return 1
    # Training windows have no "type"; held-out evaluations are {"type": "eval", ...}.
    rows = [r for r in records if "type" not in r]
    evals = [r for r in records if r.get("type") == "eval"]
    if not rows:
        print(f"{path}: no training records", file=sys.stderr)
        return 1
    plt = import_pyplot()
    if plt is None:
        return 1
    # A resumed run appends: keep the last record of each step.
    by_step = {r["step"]: r for r in rows}
    rows = [by_step[s] for s in sorted(by_step)]
    evals = [e for _, e in sorted({e["step"]: e for e in evals}.items())]
    step = [r["step"] for r in rows]
    # Named held-out sets (evaluation.names): each evaluation's "sets", in the order first seen.
    set_names = list(dict.fromkeys(n for e in evals for n in e.get("sets", {})))
    os.makedirs(out, exist_ok=True)

    def finish(name, ylabel, log=False):
        """Labels, grid and legend of the current figure; writes it to OUT_DIR/name."""
        if log:
            plt.yscale("log")
        plt.xlabel("step")
        plt.ylabel(ylabel)
        plt.grid(alpha=0.3, which="both" if log else "major")
        plt.legend(fontsize="small" if log else None)
        plt.tight_layout()
        plt.savefig(os.path.join(out, name), dpi=100)
        plt.close()

    def plot(name, series, ylabel, eval_series=(), set_key=None):
        plt.figure(figsize=(7, 4))
        for key, label in series:
            plt.plot(step, [r[key] for r in rows], label=label)
        for key, label in eval_series:
            if evals:
                plt.plot([e["step"] for e in evals], [e[key] for e in evals], "o--", label=label)
        # Each named set's curve of `set_key` (its MLM loss or accuracy).
        for name in set_names if set_key else ():
            have = [e for e in evals if name in e.get("sets", {})]
            plt.plot([e["step"] for e in have], [e["sets"][name][set_key] for e in have], "s:",
                     label=f"held-out {name} " + set_key.replace("mlm_", "MLM ").replace("_", " "))
        finish(name, ylabel)

    plot("loss.png", [("loss", "total"), ("mlm_loss", "MLM"), ("nsp_loss", "NSP")], "loss",
         [("loss", "held-out total"), ("mlm_loss", "held-out MLM")], "mlm_loss")
    plot("accuracy.png", [("mlm_accuracy", "MLM"), ("nsp_accuracy", "NSP")], "accuracy",
         [("mlm_accuracy", "held-out MLM"), ("nsp_accuracy", "held-out NSP")], "mlm_accuracy")
    plot("lr.png", [("lr", "learning rate")], "lr")
    names = ["loss.png", "accuracy.png", "lr.png"]
    # Trust ratios: records of a window with no applied update (or of AdamW) have none.
    if any("trust_ratio" in r for r in rows):
        plt.figure(figsize=(7, 4))
        for key, label, style in (("trust_ratio", "", "-"), ("trust_ratio_grad", " (gradient direction)", ":")):
            have = [r for r in rows if key in r]
            for color, stat in enumerate(("min", "median", "max") if have else ()):  # a colour per statistic
                plt.plot([r["step"] for r in have], [r[key][stat] for r in have], style, color=f"C{color}",
                         label=stat + label)
        finish("trust.png", "trust ratio ||p|| / ||u|| over the tensors", log=True)
        names.append("trust.png")
    # The gradient noise scale (logging.noise_scale), where a window's estimate is positive:
    # the batch size around which samples stop buying progress.
    noisy = [r for r in rows if isinstance(r.get("noise"), dict) and isinstance(r["noise"].get("scale"), (int, float))
             and r["noise"]["scale"] > 0]
    if noisy:
        plt.figure(figsize=(7, 4))
        plt.plot([r["step"] for r in noisy], [r["noise"]["scale"] for r in noisy], "o-", label="B_noise (sequences)")
        finish("noise.png", "gradient noise scale", log=True)
        names.append("noise.png")
    print(f"plots: {out}/" + ", ".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
