#!/usr/bin/env bash
# Usage: fatal_test.sh fatal|kill PROGRAM MPIEXEC [MPIRUN FLAGS...]
# A job with 3 ranks in which rank 1 dies (fatal_error -> MPI_Abort, or SIGKILL) must end with
# a non-zero exit within 60 s; for "fatal" the message must name the rank and the host.
set -u
mode=$1 prog=$2 mpiexec=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout 90 "$mpiexec" -np 3 "$@" "$prog" "$mode" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "mode=$mode exit=$rc elapsed=${elapsed}s"
cat "$out"
if (( rc == 0 )); then echo "FAIL: job exited 0 although rank 1 died"; exit 1; fi
if (( rc == 124 )); then echo "FAIL: job still running after 90 s"; exit 1; fi
if (( elapsed > 60 )); then echo "FAIL: job took ${elapsed}s (> 60 s) to end"; exit 1; fi
if [[ $mode == fatal ]]; then
  host=$(hostname)
  if ! grep -q "lansbert fatal \[rank 1 on " "$out"; then
    echo "FAIL: no 'lansbert fatal [rank 1 on HOST]' message"; exit 1
  fi
  if ! grep -q "deliberate failure on rank 1" "$out"; then echo "FAIL: cause missing"; exit 1; fi
  grep -q "rank 1 on $host" "$out" || echo "note: host printed differs from \$(hostname)=$host"
fi
if grep -q "was not aborted" "$out"; then echo "FAIL: a rank ran to the end"; exit 1; fi
echo PASS
