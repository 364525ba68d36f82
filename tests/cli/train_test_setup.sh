# Sourced by the `lansbert train` command-line tests (`source train_test_setup.sh "$@"`): the
# arguments each takes first (LANSBERT MAKE_TRAIN_TEST_DATA SCRATCH), a fresh scratch
# directory with the tiny vocab and shards in $tmp/data, one OpenMP thread, and fail=0 (each
# test counts its failures and exits 1 at its end), and the helpers below.
set -uo pipefail
lb=$1; mk=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
export OMP_NUM_THREADS=1
"$mk" "$tmp/data" >/dev/null || { echo "FAIL: make data"; exit 1; }
fail=0

# write_tiny_yaml FILE: a bert-tiny run over $tmp/data, 400 steps, checkpoints in $tmp/ckpt
# only where it stops.
write_tiny_yaml() {
  cat > "$1" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 16}
optimizer: {lr: 0.02}
schedule: {total_steps: 400}
checkpoint: {dir: $tmp/ckpt, every_steps: 0}
logging: {every_steps: 50}
YAML
}

# expect_error RC SUBSTRING ARGS...: `lansbert ARGS` exits RC with SUBSTRING in its stderr
# (kept in $last_err for further checks).
expect_error() {
  local rc=$1 sub=$2; shift 2
  local err; err=$("$lb" "$@" 2>&1 >/dev/null); local got=$?
  last_err=$err
  if [[ $got != "$rc" || $err != *"$sub"* ]]; then
    echo "FAIL: $* -> rc $got (want $rc), message: $err (want '$sub')"; fail=1
  fi
}
