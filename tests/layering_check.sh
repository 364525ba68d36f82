#!/usr/bin/env bash
# Fails when a file includes a header of a layer above its own, or when a file outside its
# licensed folder includes CUDA, MPI or yaml-cpp headers (README.md "Layout").
set -euo pipefail
root=${1:-.}
cd "$root"
# Layer order: a layer may include itself and those before it.
order=(core kernels backend model optim data dist train config cli)
rank_of() { local i; for i in "${!order[@]}"; do [[ ${order[$i]} == "$1" ]] && { echo "$i"; return; }; done; echo -1; }

fail=0
while IFS= read -r f; do
  layer=$(echo "$f" | awk -F/ '{ if ($1=="include") print $3; else print $2 }')
  [[ "$f" == cuda/* ]] && layer=cuda
  while IFS= read -r inc; do
    dep=$(echo "$inc" | sed -E 's|.*"lansbert/([a-z_]+)/.*|\1|')
    [[ "$layer" == cuda ]] && continue
    lr=$(rank_of "$layer"); dr=$(rank_of "$dep")
    if (( lr >= 0 && dr > lr )); then
      echo "layering: $f includes lansbert/$dep (layer $dep is above $layer)"; fail=1
    fi
  done < <(grep -hE '^#include "lansbert/' "$f" || true)
  if [[ "$f" != cuda/* ]] && grep -qE '^#include <(cuda|cublas|nccl|cudnn)' "$f"; then
    echo "layering: $f includes a CUDA header outside cuda/"; fail=1
  fi
  if [[ "$layer" != dist ]] && grep -qE '^#include <mpi\.h>' "$f"; then
    echo "layering: $f includes mpi.h outside the dist layer"; fail=1
  fi
  if [[ "$layer" != config ]] && grep -qE '^#include <yaml-cpp' "$f"; then
    echo "layering: $f includes yaml-cpp outside the config layer"; fail=1
  fi
done < <(find include src cuda -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null)
if (( fail )); then exit 1; fi
echo "layering: ok"
