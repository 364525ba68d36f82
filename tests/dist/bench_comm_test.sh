#!/usr/bin/env bash
# `lansbert bench --comm` (one process) and `lansbert bench-comm` under mpirun on 2 ranks:
# both exit 0, every row's result checks out, and the 2-rank run reports a bus bandwidth.
# Usage: bench_comm_test.sh LANSBERT MPIEXEC FLAGS...
set -uo pipefail
lb=$1; mpiexec=$2; shift 2; flags=("$@")
fail=0
out=$("$lb" bench --comm 2>&1) || { echo "FAIL: bench --comm exited non-zero"; fail=1; }
grep -q " ok$" <<<"$out" || { echo "FAIL: bench --comm printed no checked rows"; fail=1; }
out2=$("$mpiexec" -np 2 "${flags[@]}" "$lb" bench-comm --max-bytes 64K --iters 3 --warmup 1 2>&1) \
  || { echo "FAIL: bench-comm on 2 ranks exited non-zero"; fail=1; }
grep -q "2 rank(s)" <<<"$out2" || { echo "FAIL: bench-comm did not run on 2 ranks"; fail=1; }
if grep -q "WRONG" <<<"$out$out2"; then echo "FAIL: a collective gave a wrong result"; fail=1; fi
(( fail )) && { echo "$out"; echo "$out2"; exit 1; }
echo "bench comm: ok"
