#!/usr/bin/env bash
# `lansbert bench` from the command line: a CPU run prints its JSON line, and each option
# that does not apply (a CUDA-only choice on the CPU, contradictory precisions, unknown
# values) exits non-zero with a message that names the option. Usage: bench_cli_test.sh LANSBERT
set -euo pipefail
bin=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tiny=(bench --model bert-tiny --seq-len 32 --batch 2 --steps 1 --warmup 0 --threads 1)

out=$("$bin" "${tiny[@]}" --json)
[[ $out == '{"model":"bert-tiny","backend":"cpu","precision":"fp32"'* ]] || fail "json: $out"
[[ $out =~ \"tokens_per_s\":([0-9.]+) ]] || fail "no tokens_per_s: $out"
[[ ${BASH_REMATCH[1]} != 0.0 ]] || fail "zero throughput: $out"
out=$("$bin" "${tiny[@]}" --json --precision bf16)
[[ $out == *'"precision":"bf16"'* ]] || fail "bf16 emulation: $out"

# expect_error WANT ARGS...: exit non-zero, WANT in stderr+stdout.
expect_error() {
  local want=$1; shift
  local err rc
  set +e
  err=$("$bin" "${tiny[@]}" "$@" 2>&1); rc=$?
  set -e
  (( rc != 0 )) || fail "exit 0 for: $*"
  [[ $err == *"$want"* ]] || fail "for '$*' expected '$want' in: $err"
}
expect_error "--gemm-cast cublas needs --backend cuda" --precision bf16 --gemm-cast cublas
expect_error "--gemm-cast" --gemm-cast fast
expect_error "--attention cudnn needs --backend cuda" --attention cudnn
expect_error "--tf32 contradicts --precision bf16" --tf32 --precision bf16
expect_error "--precision" --precision int8
expect_error "--backend: expected cpu or cuda" --backend tpu

# --backend cuda: without a device (or without CUDA in the build) a clear refusal; with one,
# a run on it.
set +e
out=$("$bin" "${tiny[@]}" --json --backend cuda 2>&1); rc=$?
set -e
if (( rc != 0 )); then
  [[ $out == *"--backend cuda"* ]] || fail "cuda refusal: $out"
else
  [[ $out == *'"backend":"cuda"'* ]] || fail "cuda run: $out"
fi
echo "bench_cli: ok"
