#!/usr/bin/env bash
# Checks that lansbert's CUDA code builds with a CUDA 12.x toolkit for sm_70, the V100 of
# p3dn.24xlarge (CUDA 13 dropped Volta, so that cluster needs a 12.x build), on a machine
# that has only CUDA 13 installed. Not part of CI: it downloads ~1.4 GB of NVIDIA's wheels.
#
#   scripts/check-cuda12-build.sh            # after a CUDA-enabled build in build/
#   BUILD=build-gpu ARCHS="70 80" scripts/check-cuda12-build.sh
#
# What it does, and what it cannot:
#  - Assembles a CUDA 12.4 tree (headers, cudart/cuBLAS/cuBLASLt, ptxas, libdevice, cuDNN 9
#    and NCCL headers and libraries) from NVIDIA's PyPI wheels, cached in $CACHE.
#  - Compiles every cuda/*.cu with clang (the wheels carry ptxas but no nvcc driver) against
#    those headers: device code for each of ARCHS through CUDA 12.4's ptxas (real sm_70
#    cubins), host code separately; every cuda/*.cc and tests/gpu/*.cc with g++.
#  - Links the lansbert program from the build's other libraries plus these objects against
#    the 12.4 libraries, and runs `lansbert info` with them.
#  - nvcc's own front end is not exercised, and the program it links has no device code
#    embedded (no fatbinary in the wheels): it is a compile-and-link check, not a runnable
#    V100 build. docs/cuda.md says how to make that one with a CUDA 12.x toolkit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lansbert/cuda-12.4}
ARCHS=${ARCHS:-"70 80 90"}
CLANG=${CLANG:-clang++-19}
OUTDIR=${OUTDIR:-$BUILD/cuda12-check}
# The versions this check was last run with (docs/cuda.md records the result).
WHEELS=("nvidia-cuda-nvcc-cu12==12.4.131" "nvidia-cuda-runtime-cu12==12.4.127"
        "nvidia-cublas-cu12==12.4.5.8" "nvidia-cuda-cccl-cu12==12.4.127.post1"
        "nvidia-cudnn-cu12==9.28.0.42" "nvidia-nccl-cu12==2.32.3")

die() { echo "check-cuda12-build: $*" >&2; exit 1; }

[[ -f $BUILD/build.ninja ]] || die "$BUILD has no build.ninja: configure a CUDA build first (README, docs/cuda.md)"
grep -q 'liblansbert_cuda.a' "$BUILD/build.ninja" ||
  die "$BUILD was configured without CUDA: the link step needs its other libraries from a CUDA build"
if ! command -v "$CLANG" >/dev/null; then
  echo "installing clang-19 (its CUDA front end knows CUDA 12.4 and sm_70)"
  apt-get install -y -q clang-19 >/dev/null
fi
PY=$(command -v python3)

# --- 1. a CUDA 12.4 tree from the wheels ------------------------------------------------
TREE=$CACHE/root
if [[ ! -f $TREE/include/cuda.h ]]; then
  echo "downloading CUDA 12.4 wheels into $CACHE/wheels"
  mkdir -p "$CACHE/wheels"
  rm -rf "$CACHE/wheels"  # only the pinned versions get unpacked below
  mkdir -p "$CACHE/wheels"
  "$PY" -m pip download -q --no-deps -d "$CACHE/wheels" "${WHEELS[@]}"
  rm -rf "$CACHE/unpacked" "$TREE.partial"
  mkdir -p "$CACHE/unpacked" "$TREE.partial"/{bin,include,lib64,nvvm}
  for w in "$CACHE"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$CACHE/unpacked"; done
  X=$CACHE/unpacked/nvidia
  for part in cuda_runtime cuda_nvcc cublas cuda_cccl cudnn nccl; do
    cp -r "$X/$part/include/." "$TREE.partial/include/"
    [[ -d $X/$part/lib ]] && cp -r "$X/$part/lib/." "$TREE.partial/lib64/"
  done
  rm -f "$TREE.partial"/include/__init__.py "$TREE.partial"/lib64/__init__.py
  cp -r "$X/cuda_nvcc/nvvm/." "$TREE.partial/nvvm/"
  cp "$X/cuda_nvcc/bin/ptxas" "$TREE.partial/bin/"
  chmod +x "$TREE.partial/bin/ptxas"
  # The wheels ship only the sonames; the linker wants the plain names.
  (cd "$TREE.partial/lib64" && for f in *.so.*; do ln -sf "$f" "${f%%.so.*}.so"; done)
  rm -rf "$CACHE/unpacked"
  mv "$TREE.partial" "$TREE"
fi
grep -q 'define CUDA_VERSION 1204' "$TREE/include/cuda.h" || die "$TREE is not CUDA 12.4"
echo "CUDA tree: $TREE ($("$TREE/bin/ptxas" --version | tail -1))"

# --- 2. compile --------------------------------------------------------------------------
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR/tests"
DEFS=(-DLANSBERT_HAVE_CUDA=1 -DLANSBERT_HAVE_CUDNN=1 -DLANSBERT_HAVE_NCCL=1
      -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED
      -I"$ROOT/include" -I"$ROOT/cuda" -I/usr/include/x86_64-linux-gnu/openblas-openmp)
CUDA_FLAGS=(-x cuda --cuda-path="$TREE" -std=c++17 -O3 -Wall -Wno-unused-parameter -Wno-unknown-cuda-version
            "-DLANSBERT_CUDA_ARCHS=\"$ARCHS\"")
fail=0
n_dev=0
for f in "$ROOT"/cuda/*.cu; do
  b=$(basename "$f" .cu)
  for a in $ARCHS; do
    "$CLANG" "${CUDA_FLAGS[@]}" --cuda-gpu-arch=sm_$a --cuda-device-only "${DEFS[@]}" -c "$f" \
      -o "$OUTDIR/$b.sm_$a.cubin" || { echo "FAILED: $f device code for sm_$a"; fail=1; }
    n_dev=$((n_dev + 1))
  done
  "$CLANG" "${CUDA_FLAGS[@]}" --cuda-gpu-arch=sm_70 --cuda-host-only "${DEFS[@]}" -c "$f" \
    -o "$OUTDIR/$b.host.o" || { echo "FAILED: $f host code"; fail=1; }
done
for f in "$ROOT"/cuda/*.cc; do
  g++ -std=c++20 -O2 -Wall -Wextra -Wno-unused-parameter -isystem "$TREE/include" "${DEFS[@]}" -c "$f" \
    -o "$OUTDIR/$(basename "$f" .cc).o" || { echo "FAILED: $f"; fail=1; }
done
for f in "$ROOT"/tests/gpu/*.cc; do
  g++ -std=c++20 -O1 -fopenmp -isystem "$TREE/include" "${DEFS[@]}" -I"$ROOT/tests/train" \
    -I"$ROOT/tests/common" -c "$f" -o "$OUTDIR/tests/$(basename "$f" .cc).o" || { echo "FAILED: $f"; fail=1; }
done
[[ $fail == 0 ]] || die "the CUDA code does not compile against CUDA 12.4 (above)"
echo "compiled: $(ls "$ROOT"/cuda/*.cu | wc -l) .cu files for sm {$ARCHS} ($n_dev device compilations," \
     "ptxas 12.4), $(ls "$ROOT"/cuda/*.cc | wc -l) cuda/*.cc and $(ls "$ROOT"/tests/gpu/*.cc | wc -l) tests/gpu/*.cc"
if [[ " $ARCHS " == *" 70 "* ]]; then
  for c in "$OUTDIR"/*.sm_70.cubin; do
    # e_flags' low byte is the SM number: 0x46 = 70.
    flags=$(od -An -tx1 -j48 -N1 "$c" | tr -d ' ') || die "cannot read $c"
    [[ $flags == 46 ]] || die "$c is not an sm_70 cubin (e_flags byte $flags)"
  done
fi

# --- 3. link against the 12.4 libraries --------------------------------------------------
ar rcs "$OUTDIR/liblansbert_cuda12.a" "$OUTDIR"/*.host.o $(ls "$OUTDIR"/*.o | grep -v '\.host\.o$')
link=$(cd "$BUILD" && ninja -t commands lansbert | tail -1) || die "ninja -t commands lansbert failed in $BUILD"
[[ $link == *liblansbert_cuda.a* ]] || die "could not read the lansbert link line from $BUILD"
link=$(sed -e "s#-o lansbert #-o $OUTDIR/lansbert #" -e "s#liblansbert_cuda\.a#$OUTDIR/liblansbert_cuda12.a#g" \
           -e 's#[^ ]*libculibos\.a##' -e 's#-lcudadevrt##' -e 's#-lcudart_static##' \
           -e 's#-L[^ ]*cuda[^ ]*##g' -e "s#/usr/local/cuda[^ :]*/lib[^ :/]*/#$TREE/lib64/#g" \
           -e "s#/usr/local/cuda[^ :]*/lib[^ :/]*#$TREE/lib64#g" <<<"$link")
(cd "$BUILD" && bash -c "$link") || die "the link against CUDA 12.4's libraries failed"
libs=$(ldd "$OUTDIR/lansbert") || die "ldd $OUTDIR/lansbert failed"
[[ $libs == *"libcudart.so.12 => $TREE"* ]] || die "$OUTDIR/lansbert does not load CUDA 12.4's cudart"
echo "linked: $OUTDIR/lansbert against $(cd "$TREE/lib64" && ls libcudart.so.12 libcublas.so.12 libcublasLt.so.12 libnccl.so.2 | tr '\n' ' ')"
info=$("$OUTDIR/lansbert" info) || die "$OUTDIR/lansbert info failed"
grep -E "CUDA backend|cuDNN" <<<"$info" || die "lansbert info printed no CUDA lines: $info"
echo "check-cuda12-build: OK (compile and link only; no device code embedded, nvcc's front end not used)"
