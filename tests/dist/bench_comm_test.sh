#!/usr/bin/env bash
# `lansbert bench --comm` (one process) and `lansbert bench-comm` under mpirun on 2 ranks:
# both exit 0, every row's result checks out, and the 2-rank run reports a bus bandwidth; so
# does the 16-bit wire (--dtype bf16).
# Without a GPU, `bench-comm --backend cuda` on 2 ranks fails on both ranks with the reason
# (no rank is left waiting for the other in NCCL's set-up).
# Usage: bench_comm_test.sh LANSBERT MPIEXEC FLAGS...
set -uo pipefail
lb=$1; mpiexec=$2; shift 2; flags=("$@")
fail=0
out=$("$lb" bench --comm 2>&1) || { echo "FAIL: bench --comm exited non-zero"; fail=1; }
grep -q " ok$" <<<"$out" || { echo "FAIL: bench --comm printed no checked rows"; fail=1; }
grep -q "^# one rank moves no data" <<<"$out" || { echo "FAIL: bench --comm on one rank does not say it moves nothing"; fail=1; }
out2=$("$mpiexec" -np 2 "${flags[@]}" "$lb" bench-comm --max-bytes 64K --iters 3 --warmup 1 2>&1) \
  || { echo "FAIL: bench-comm on 2 ranks exited non-zero"; fail=1; }
grep -q "2 rank(s)" <<<"$out2" || { echo "FAIL: bench-comm did not run on 2 ranks"; fail=1; }
# Sizes step by 4 from 8 and end with --max-bytes itself (65536, not 32768).
grep -qE "^ +65536 " <<<"$out2" || { echo "FAIL: bench-comm --max-bytes 64K has no 65536 row"; fail=1; }
# --max-bytes 33 is 8 floats, as 32 is: one row for them, not two.
rows=$("$lb" bench-comm --min-bytes 8 --max-bytes 33 --iters 1 --warmup 0 --no-baseline 2>&1 | grep -cE "^ +32 ")
[[ $rows == 1 ]] || { echo "FAIL: bench-comm --max-bytes 33 printed $rows rows of 32 bytes, not 1"; fail=1; }
"$lb" bench-comm --min-bytes 0.5 >/dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || { echo "FAIL: bench-comm --min-bytes 0.5 (0 bytes) exited $rc, not 2"; fail=1; }
out4=$("$mpiexec" -np 2 "${flags[@]}" "$lb" bench-comm --dtype bf16 --max-bytes 64K --iters 3 --warmup 1 --no-baseline 2>&1) \
  || { echo "FAIL: bench-comm --dtype bf16 on 2 ranks exited non-zero"; fail=1; }
grep -q "bf16 wire" <<<"$out4" && grep -q " ok$" <<<"$out4" || { echo "FAIL: bench-comm --dtype bf16 printed no checked rows"; fail=1; }
out3=
if ! "$lb" info 2>/dev/null | grep -qE "CUDA backend *: built, [1-9]"; then
  out3=$(timeout 60 "$mpiexec" -np 2 "${flags[@]}" "$lb" bench-comm --backend cuda --max-bytes 1K 2>&1)
  rc=$?
  if [[ $rc == 0 || $rc == 124 ]]; then echo "FAIL: bench-comm --backend cuda without a GPU: rc $rc"; fail=1; fi
  grep -qE "no CUDA device visible|no device visible|built without" <<<"$out3" \
    || { echo "FAIL: bench-comm --backend cuda did not say why it cannot run"; fail=1; }
fi
if grep -q "WRONG" <<<"$out$out2$out4"; then echo "FAIL: a collective gave a wrong result"; fail=1; fi
(( fail )) && { echo "$out"; echo "$out2"; echo "$out3"; echo "$out4"; exit 1; }
echo "bench comm: ok"
