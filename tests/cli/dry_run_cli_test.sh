#!/usr/bin/env bash
# `lansbert train --dry-run` from the command line, on the shipped bert-large phase-2 config:
# the plan, --world planning a cluster's job from one process (the shipped config fits the
# paper's 1,536 ranks; micro_batch 8 is refused there by name), --device-memory's largest
# micro_batch for each recomputation setting (and with the flash attention), --gpu's precision
# check for a GPU model, the host memory checkpoint.async holds (and its refusal with sharded
# optimizer state), the flags refused without --dry-run, and nothing written.
# Usage: dry_run_cli_test.sh LANSBERT SOURCE_DIR
set -uo pipefail
lb=$(realpath "$1"); src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"  # the config's relative checkpoint.dir and data globs resolve here: nothing may appear
cfg=$src/configs/bert-large-phase2-33k.yaml
fail=0
has() {  # OUTPUT WANT: WANT is a substring of OUTPUT
  [[ $1 == *"$2"* ]] || { echo "FAIL: no '$2' in:"; echo "$1" | tail -12; fail=1; }
}
expect_error() {  # rc substring args...
  local rc=$1 sub=$2; shift 2
  local err; err=$("$lb" "$@" 2>&1 >/dev/null); local got=$?
  if [[ $got != "$rc" || $err != *"$sub"* ]]; then
    echo "FAIL: $* -> rc $got (want $rc), message: $err (want '$sub')"; fail=1
  fi
}

out=$("$lb" train --config "$cfg" --dry-run) || { echo "FAIL: dry run exited $?"; fail=1; }
has "$out" "world size          : 1"
has "$out" "micro-batch per rank: 11"
has "$out" "data.train          : NOT READABLE here"
has "$out" "checkpoints         : ckpt/bert-large-phase2 (metrics: ckpt/bert-large-phase2/metrics.jsonl; TensorBoard: ckpt/bert-large-phase2/tensorboard)"
has "$out" "checkpoint.async    : rank 0 holds copies of the weights and moments (about 4.03 GB of host memory)"
expect_error 2 "checkpoint.async: needs replicated optimizer state" \
  train --config "$cfg" --dry-run --set distributed.shard_optimizer=true
out=$("$lb" train --config "$cfg" --dry-run --world 1536 --device-memory 32) || { echo "FAIL: --world 1536 exited $?"; fail=1; }
has "$out" "world size          : 1536"
has "$out" "accumulation        : 2 micro-batches per update"
has "$out" "gradient reduction  : fp16"
# 22 sequences per rank: micro_batch 11 (two per update) or, recomputing, all 22 at once.
has "$out" "batch.recompute: none     : micro_batch 11 fits"
has "$out" "batch.recompute: attention: micro_batch 22 fits"
has "$out" "batch.recompute: layers   : micro_batch 22 fits"
# The flash attention lays out no [B, A, S, S] slots, so as much fits without recomputation.
out=$("$lb" train --config "$cfg" --dry-run --world 1536 --device-memory 32 --set precision.attention=flash) || { echo "FAIL: flash dry run exited $?"; fail=1; }
has "$out" "batch.recompute: none     : micro_batch 22 fits"
out=$("$lb" train --config "$cfg" --dry-run --device-memory 1) || { echo "FAIL: --device-memory 1 dry run exited $?"; fail=1; }
has "$out" "batch.recompute: layers   : no micro_batch dividing the 33792 sequences per rank fits"
expect_error 2 "is not a multiple of batch.micro_batch * world = 8 * 1536" \
  train --config "$cfg" --dry-run --world 1536 --set batch.micro_batch=8
# --gpu: the precision judged for that GPU model before anything is printed.
out=$("$lb" train --config "$cfg" --dry-run --gpu v100 --set precision.attention=cudnn) || { echo "FAIL: --gpu v100 exited $?"; fail=1; }
has "$out" "GPU                 : V100 (sm_70): fp16 GEMMs run"
has "$out" "cuDNN's fused attention needs sm_80+, the hand-written attention runs"
out=$("$lb" train --config "$cfg" --dry-run --gpu "H100 PCIe") || { echo "FAIL: --gpu H100 PCIe dry run exited $?"; fail=1; }
has "$out" "GPU                 : H100 PCIe (sm_90): fp16 GEMMs run"
bf16=(--set precision.dtype=bf16 --set precision.loss_scale=none --set distributed.grad_reduce_dtype=bf16)
expect_error 2 "precision.dtype: bf16 needs bf16 tensor cores (sm_80 or newer: A100, H100, H200); V100 (sm_70) has none" \
  train --config "$cfg" --dry-run --gpu v100 "${bf16[@]}"
[[ -z $("$lb" train --config "$cfg" --dry-run --gpu v100 "${bf16[@]}" 2>/dev/null) ]] ||
  { echo "FAIL: a refused --gpu dry run printed a plan"; fail=1; }
out=$("$lb" train --config "$cfg" --dry-run --gpu a100 "${bf16[@]}") || { echo "FAIL: --gpu a100 bf16 dry run exited $?"; fail=1; }
has "$out" "GPU                 : A100 (sm_80): bf16 GEMMs run"
expect_error 2 "--gpu: unknown GPU model 'b200' (known: H200, H100 PCIe, H100 SXM, A100-SXM4-80GB, A100 80GB PCIe, A100, V100)" \
  train --config "$cfg" --dry-run --gpu b200
expect_error 2 "--gpu requires --dry-run" train --config "$cfg" --gpu v100
expect_error 2 "--world requires --dry-run" train --config "$cfg" --world 8
expect_error 2 "--device-memory requires --dry-run" train --config "$cfg" --device-memory 32
expect_error 2 "--device-memory: 'nan' is not a number in [0.01, 1e+06]" train --config "$cfg" --dry-run --device-memory nan
[[ -z $(ls -A "$tmp") ]] || { echo "FAIL: a dry run wrote: $(ls -A "$tmp")"; fail=1; }
(( fail )) && exit 1
echo "dry_run_cli: ok"
