#!/usr/bin/env bash
# Builds bench_optim (Release, CPU only) and times one optimizer update over the bert-base
# parameter table; docs/performance.md records the output with the machine and date.
# Usage: scripts/bench-optimizer.sh [preset=bert-base] [reps=5]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DLANSBERT_CUDA=OFF >/dev/null
cmake --build build -j2 --target bench_optim
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%F)"
build/tests/bench_optim "${1:-bert-base}" "${2:-5}"
