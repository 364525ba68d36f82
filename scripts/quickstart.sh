#!/usr/bin/env bash
# From a fresh Debian machine to a trained bert-tiny and its plots, in one line:
#   scripts/quickstart.sh
# Installs the dependencies, builds (CPU), fetches the sample corpus and its shards, trains
# configs/tiny-demo.yaml, plots the metrics and says where everything went.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh
SUDO=; [[ $(id -u) -ne 0 ]] && SUDO=sudo
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || $SUDO apt-get install -y python3-matplotlib
cmake -S . -B build -G Ninja -DLANSBERT_CUDA=OFF
cmake --build build -j"$(nproc)"
scripts/get-sample-corpus.sh build/lansbert
# lansbert never trains into a used checkpoint directory: an earlier demo run is kept, renamed.
if [[ -e runs/tiny-demo ]]; then
  old="runs/tiny-demo.$(date +%Y%m%d-%H%M%S)"
  mv runs/tiny-demo "$old"
  echo "quickstart: the previous run is now in $old"
fi
# Debian's OpenBLAS falls back to its slowest x86-64 kernels on CPUs newer than it knows
# (lansbert info says so): the demo then takes 3 times as long. Its AVX2 kernels run on any
# CPU with AVX2 and FMA, which is what the warning checks. A value already set is kept.
info=$(build/lansbert info 2>/dev/null || true)  # whole, not piped into grep -q (pipefail)
if [[ -z ${OPENBLAS_CORETYPE:-} && $info == *"OpenBLAS chose its"* ]]; then
  export OPENBLAS_CORETYPE=Haswell
  echo "quickstart: OpenBLAS did not know this CPU; using its AVX2 (Haswell) kernels: OPENBLAS_CORETYPE=Haswell"
fi
# Small matrices: one OpenMP thread avoids oversubscription on shared or small machines.
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} build/lansbert train --config configs/tiny-demo.yaml
/usr/bin/python3 scripts/plot-metrics.py runs/tiny-demo/metrics.jsonl runs/tiny-demo/plots
echo "checkpoint: $root/runs/tiny-demo/latest -> $(readlink runs/tiny-demo/latest)"
echo "plots:      $root/runs/tiny-demo/plots/{loss,accuracy,lr,trust,noise}.png"
echo "curves:     tensorboard --logdir $root/runs   (where TensorBoard is installed)"
echo "export:     build/lansbert export --checkpoint runs/tiny-demo --out runs/tiny-demo/hf"
echo "data:       build/lansbert show --data data/sample/shards-128 --vocab tests/data/bert-base-uncased-vocab.txt [--stats]"
