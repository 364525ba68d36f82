# Sourced by the `lansbert train` command-line tests (`source train_test_setup.sh "$@"`): the
# arguments each takes first (LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH), a fresh scratch
# directory with the tiny vocab and shards in $tmp/data, one OpenMP thread, and fail=0 (each
# test counts its failures and exits 1 at its end).
set -uo pipefail
lb=$1; mk=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
export OMP_NUM_THREADS=1
"$mk" "$tmp/data" >/dev/null || { echo "FAIL: make data"; exit 1; }
fail=0
