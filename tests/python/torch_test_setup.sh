# Sourced by the tests that check lansbert against PyTorch and transformers
# (`source torch_test_setup.sh "$@"`): their arguments (LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH)
# as lb, mk, tmp; py, Debian's python3; exit 77 (CTest skip) when it cannot import torch and
# transformers; a fresh scratch directory, one OpenMP thread, and check() below.
set -euo pipefail
lb=$1; mk=$2; tmp=$3
py=/usr/bin/python3; [[ -x $py ]] || py=python3
if ! "$py" -c 'import torch, transformers' 2>/dev/null; then
  echo "SKIP: torch/transformers cannot be imported by $py"; exit 77
fi
# check SCRIPT ARGS...: a checker run with $py. Its own skip (77) cannot be right once the
# import check above passed: here it fails the test, as any other non-zero exit does.
check() {
  local rc=0; "$py" "$@" || rc=$?
  (( rc == 77 )) && echo "FAIL: $(basename "$1") skipped although torch and transformers import"
  return $(( rc != 0 ))
}
rm -rf "$tmp"; mkdir -p "$tmp"
export OMP_NUM_THREADS=1
