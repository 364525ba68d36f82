#!/usr/bin/env bash
# Installs every build and test dependency of lansbert from Debian packages.
# Idempotent: packages already present are skipped, so CI and repeated runs are cheap.
# The CUDA toolkit is not installed here: it is found under /usr/local/cuda when present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libopenblas-dev libopenblas-openmp-dev libopenmpi-dev openmpi-bin libfabric-dev libhdf5-dev
  libutf8proc-dev zlib1g-dev libzstd-dev libbz2-dev libexpat1-dev libgtest-dev
  libboost-context-dev python3  # the CUDA emulator (tests/emu): fibers, and the launch rewrite
  zstd bzip2  # the prep tests compress a corpus
)
# Extras that a caller may ask for (benchmarks, plots): scripts/install-deps.sh --extras
if [[ "${1:-}" == "--extras" ]]; then
  packages+=(python3-torch python3-numpy python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
