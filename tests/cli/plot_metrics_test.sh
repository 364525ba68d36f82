#!/usr/bin/env bash
# scripts/plot-metrics.py with Debian's python3: without matplotlib it exits non-zero with one
# line naming the package to install (not a traceback); with it, it draws the three PNGs from
# a metrics file holding training and held-out lines, and trust.png where the records carry
# trust ratios; a torn line is named and skipped, a
# missing file is one line. Exit 77 (CTest skip) after the first half when matplotlib is missing.
# Usage: plot_metrics_test.sh SOURCE_DIR
set -euo pipefail
src=$1
py=/usr/bin/python3; [[ -x $py ]] || py=python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$tmp/metrics.jsonl" <<'JSON'
{"step": 10, "loss": 10.9, "mlm_loss": 10.2, "nsp_loss": 0.7, "mlm_accuracy": 0.01, "nsp_accuracy": 0.5, "lr": 0.001}
{"step": 20, "loss": 9.8, "mlm_loss": 9.1, "nsp_loss": 0.69, "mlm_accuracy": 0.03, "nsp_accuracy": 0.55, "lr": 0.002}
{"type": "eval", "step": 20, "loss": 9.9, "mlm_loss": 9.2, "nsp_loss": 0.7, "mlm_accuracy": 0.02, "nsp_accuracy": 0.5, "sequences": 8, "seconds": 0.1}
JSON

# matplotlib missing: a package of that name earlier on the path fails to import, as the
# real one does when python3-matplotlib is not installed.
mkdir -p "$tmp/shim/matplotlib"
echo 'raise ModuleNotFoundError("No module named '"'matplotlib'"'", name="matplotlib")' \
  > "$tmp/shim/matplotlib/__init__.py"
set +e
err=$(PYTHONPATH="$tmp/shim" "$py" "$src/scripts/plot-metrics.py" "$tmp/metrics.jsonl" "$tmp/none" 2>&1 >/dev/null)
rc=$?
set -e
(( rc != 0 )) || fail "exit 0 without matplotlib"
[[ $err == *"apt-get install python3-matplotlib"* ]] || fail "no install hint: $err"
[[ $err != *Traceback* ]] || fail "a traceback instead of one line: $err"
(( $(wc -l <<< "$err") == 1 )) || fail "more than one line: $err"
[[ ! -e $tmp/none ]] || fail "created the output directory without matplotlib"

# A torn line (a run that died on a full disk) is named by its line number and skipped; the
# file is read before matplotlib is looked for, so this is checked without it too.
{ head -1 "$tmp/metrics.jsonl"; printf '{"step": 15, "loss": 10.'; echo; tail -2 "$tmp/metrics.jsonl"; } > "$tmp/torn.jsonl"
set +e
err=$(PYTHONPATH="$tmp/shim" "$py" "$src/scripts/plot-metrics.py" "$tmp/torn.jsonl" "$tmp/none" 2>&1 >/dev/null)
set -e
[[ $err == *"torn.jsonl:2: skipped: "*'{"step": 15, "loss": 10.'* ]] || fail "torn line not named: $err"
[[ $err == *"apt-get install python3-matplotlib"* ]] || fail "the torn line stopped the run: $err"
[[ $err != *Traceback* ]] || fail "a traceback for a torn line: $err"
# A missing file is one line, not a traceback.
set +e
err=$("$py" "$src/scripts/plot-metrics.py" "$tmp/missing.jsonl" 2>&1 >/dev/null); rc=$?
set -e
(( rc == 1 )) && [[ $err == *"missing.jsonl: cannot read: No such file or directory" && $err != *Traceback* ]] ||
  fail "missing file: rc $rc: $err"

if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" "$src/scripts/plot-metrics.py" "$tmp/metrics.jsonl" "$tmp/plots" > /dev/null
  for f in loss accuracy lr; do [[ -s $tmp/plots/$f.png ]] || fail "no $f.png"; done
  [[ ! -e $tmp/plots/trust.png ]] || fail "trust.png from records without trust ratios"
  # Records with trust ratios (LANS: both directions; a window without an update has none).
  sed -e 's/"lr": 0.001}/"lr": 0.001, "trust_ratio": {"min": 0.01, "median": 0.1, "max": 1.5}, "trust_ratio_grad": {"min": 0.02, "median": 0.2, "max": 1.2}}/' \
    "$tmp/metrics.jsonl" > "$tmp/trust.jsonl"
  grep -q trust_ratio_grad "$tmp/trust.jsonl" || fail "the trust test file has no trust ratios"
  out=$("$py" "$src/scripts/plot-metrics.py" "$tmp/trust.jsonl" "$tmp/trust-plots")
  [[ -s $tmp/trust-plots/trust.png && $out == *"lr.png, trust.png" ]] || fail "no trust.png: $out"
  "$py" "$src/scripts/plot-metrics.py" "$tmp/torn.jsonl" "$tmp/torn-plots" > /dev/null 2>&1 || fail "torn file not plotted"
  for f in loss accuracy lr; do [[ -s $tmp/torn-plots/$f.png ]] || fail "no $f.png from the torn file"; done
  # Named held-out sets (evaluation.names): each set's MLM curve is drawn too, so the loss and
  # accuracy plots change (the same file without "sets" draws the first ones above).
  sed -e 's/"seconds": 0.1}/"seconds": 0.1, "sets": {"wiki": {"loss": 9.7, "mlm_loss": 9.0, "nsp_loss": 0.7, "mlm_accuracy": 0.03, "nsp_accuracy": 0.5, "sequences": 4, "rows": 4}, "books": {"loss": 10.1, "mlm_loss": 9.4, "nsp_loss": 0.7, "mlm_accuracy": 0.01, "nsp_accuracy": 0.5, "sequences": 4, "rows": 4}}}/' \
    "$tmp/metrics.jsonl" > "$tmp/sets.jsonl"
  grep -q '"books"' "$tmp/sets.jsonl" || fail "the sets test file has no sets"
  "$py" "$src/scripts/plot-metrics.py" "$tmp/sets.jsonl" "$tmp/set-plots" > /dev/null || fail "sets not plotted"
  for f in loss accuracy; do
    cmp -s "$tmp/plots/$f.png" "$tmp/set-plots/$f.png" && fail "$f.png has no curve of the named sets"
  done
  cmp -s "$tmp/plots/lr.png" "$tmp/set-plots/lr.png" || fail "lr.png changed with the named sets"
  [[ ! -e $tmp/plots/noise.png ]] || fail "noise.png from records without a noise scale"
  # logging.noise_scale: noise.png from the records whose estimate is positive (a null scale,
  # where the |G|² estimate was not, is skipped).
  sed -e 's/"lr": 0.001}/"lr": 0.001, "noise": {"scale": null, "grad_sq": -0.5, "trace": 3, "steps": 10}}/' \
      -e 's/"lr": 0.002}/"lr": 0.002, "noise": {"scale": 1500.0, "grad_sq": 0.02, "trace": 30, "steps": 10}}/' \
    "$tmp/metrics.jsonl" > "$tmp/noise.jsonl"
  out=$("$py" "$src/scripts/plot-metrics.py" "$tmp/noise.jsonl" "$tmp/noise-plots")
  [[ -s $tmp/noise-plots/noise.png && $out == *"lr.png, noise.png" ]] || fail "no noise.png: $out"
else
  echo "SKIP: matplotlib not installed (scripts/install-test-extras.sh installs it): the drawing half did not run"
  exit 77
fi
echo "plot_metrics: ok"
