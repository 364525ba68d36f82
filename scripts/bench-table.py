#!/usr/bin/env python3
"""Markdown table from `lansbert bench --json` lines (one JSON object per line, as
scripts/gpu-check.sh collects in bench.jsonl), ready for docs/performance.md.

Usage: bench-table.py bench.jsonl [more.jsonl ...]   (or lines on stdin)
Lines that are not JSON objects from `lansbert bench` (error text, blanks) are skipped and
counted on stderr. Standard library only: it runs on the GPU machine as it is.
"""
import json
import sys

COLUMNS = [
    # (header, function of one record -> cell text)
    ("model", lambda r: r["model"]),
    ("seq", lambda r: str(r["seq_len"])),
    ("batch", lambda r: str(r["batch"]) + (" (probed)" if r.get("batch_probed") else "")
     + (f" (recompute {r['recompute']})" if isinstance(r.get("recompute"), str) and r["recompute"] != "none" else "")
     + (f" ({'packed' if r.get('packing') else 'padded'} in {r['rows']} rows, fill {r['fill']:.2f})"
        if r.get("packing") or r.get("fill", 1) < 1 else "")),
    ("GEMMs", lambda r: r["precision"] + (" (in-cuBLAS cast)" if r.get("gemm_cast") == "cublas" else "")
     + (" (no cast reuse)" if r.get("cast_reuse") == "off" else "")
     + (", 16-bit activations" if r.get("activations") == "16bit" else "")
     + (", tanh GELU" if r.get("hidden_act") == "gelu_tanh" else "")),
    ("attention", lambda r: r.get("attention", "native")),
    ("fwd ms", lambda r: f"{r['forward_ms']:.1f}"),
    ("bwd ms", lambda r: f"{r['backward_ms']:.1f}"),
    ("update ms", lambda r: f"{r['optimizer_ms']:.1f}" if "optimizer_ms" in r else "-"),
    ("tokens/s", lambda r: f"{r['tokens_per_s']:,.0f}"),
    ("seq/s", lambda r: f"{r['sequences_per_s']:,.1f}"),
    ("TFLOP/s", lambda r: f"{r['gflops'] / 1e3:.1f}"),
    ("MFU", lambda r: f"{100 * r['mfu']:.1f}%" if r.get("mfu") else "-"),
    ("MFU vs 16-bit peak", lambda r: f"{100 * r['mfu_vs_half_peak']:.1f}%" if r.get("mfu_vs_half_peak") else "-"),
    # The traffic 16-bit GEMM operands add: 6 bytes per element of a cast pass, 2 per element
    # of a 16-bit copy written by the op that produced the tensor (docs/performance.md).
    ("operand GB/step", lambda r: f"{(6 * r['gemm_cast_elements_per_step'] + 2 * r.get('gemm_copy_writes_per_step', 0)) / 1e9:.2f}"
     if "gemm_cast_elements_per_step" in r else "-"),
]
REQUIRED = ("model", "seq_len", "batch", "precision", "forward_ms", "backward_ms", "tokens_per_s",
            "sequences_per_s", "gflops")


def records(lines):
    skipped = 0
    out = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            skipped += bool(line)
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if not isinstance(r, dict) or any(k not in r for k in REQUIRED):
            skipped += 1
            continue
        out.append(r)
    return out, skipped


def table(recs):
    rows = [[f(r) for _, f in COLUMNS] for r in recs]
    head = [h for h, _ in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main(argv):
    if len(argv) > 1:
        lines = []
        for path in argv[1:]:
            with open(path, encoding="utf-8") as f:
                lines += f.readlines()
    else:
        lines = sys.stdin.readlines()
    recs, skipped = records(lines)
    devices = sorted({r["device"] for r in recs if "device" in r})
    if devices:
        print("Device: " + "; ".join(devices) + "\n")
    print(table(recs))
    if skipped:
        print(f"bench-table: skipped {skipped} line(s) that are not bench results", file=sys.stderr)
    return 0 if recs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
