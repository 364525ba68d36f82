#!/usr/bin/env bash
# The one test command (README, .ci/run): installs dependencies, configures, builds with
# all cores and runs the whole CTest suite on the CPU. GPU tests (label gpu) skip themselves
# when no device is present; where the CUDA toolkit is installed they also run on the CUDA
# emulator (label emu, docs/emulator.md). Extra CMake arguments may be passed through
# LANSBERT_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-test-extras.sh  # best effort: Python references for the export test
build_dir=${LANSBERT_BUILD_DIR:-build}
# One CUDA architecture in CI keeps nvcc time small; users pick theirs with the cache variable.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLANSBERT_CUDA_ARCHITECTURES="${LANSBERT_CUDA_ARCHITECTURES:-90}" ${LANSBERT_CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$(nproc)"
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)" "$@"
