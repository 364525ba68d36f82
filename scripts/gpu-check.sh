#!/usr/bin/env bash
# GPU checks in two halves (docs/GPU-CHECKS.md in the shared docs, docs/cuda.md here):
#   scripts/gpu-check.sh --bundle        here, on a machine with the CUDA toolkit and the
#                                        project's Debian dependencies (no GPU needed):
#                                        Release build in build-gpu/, then a self-contained
#                                        bundle in build-gpu/bundle/ (bin/ + libs.tar.gz with
#                                        lib/ and runtime-fallback/, < 64 MiB).
#   scripts/gpu-check.sh --run [--sanitize]
#                                        there, on the lent GPU machine, with build-gpu/bundle
#                                        carried over: nvidia-smi, test_gpu (one process per
#                                        test; with --sanitize the whole binary under
#                                        compute-sanitizer's memcheck, and the flash attention,
#                                        LayerNorm and softmax tests under racecheck and
#                                        synccheck), the command line end to end
#                                        (train fp32/bf16/bf16 recomputing/bf16 with cuDNN attention + eval, bench-comm), and `lansbert bench --backend
#                                        cuda` (bert-base/large, 128/20 and 512/80, fp32, TF32
#                                        and bf16 (cast kernels and --gemm-cast cublas), the
#                                        cuDNN fused attention, --batch 0 probes and a
#                                        --profile run with its roofline floor).
#                                        Output goes to $OUT (or ./gpu-check-out).
# Device call, for example:
#   run(command="bash scripts/gpu-check.sh --run", carry=["build-gpu/bundle"], timeout_s=480)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-gpu"
bundle="$build/bundle"
arch=${LANSBERT_GPU_ARCH:-90}
max_bundle_mib=64

bundle_step() {
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLANSBERT_CUDA=ON \
    -DLANSBERT_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_ARCHITECTURES="$arch"
  cmake --build "$build" -j "${JOBS:-2}" --target lansbert test_gpu make_train_test_data
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  cp "$build/lansbert" "$build/tests/test_gpu" "$build/tests/make_train_test_data" "$bundle/bin/"
  # Shared libraries the device lacks. Left out: the C/C++ runtime and loader (the device's
  # own must be used) and every CUDA, cuBLAS, cuDNN, NCCL and driver library (the device's
  # match its driver).
  local skip='^(libc|libstdc\+\+|libgcc_s|libm|libpthread|libdl|librt|ld-linux|linux-vdso|libcuda|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvidia|libnvrtc|libnvJitLink)[.-]'
  for exe in "$bundle"/bin/*; do
    ldd "$exe" | awk '/=> \// { print $1, $3 }'
  done | sort -u | while read -r name path; do
    if [[ "$name" =~ $skip ]]; then continue; fi
    cp -L "$path" "$bundle/lib/$name"
  done
  # Kept apart from lib/ and used only when the device's C++ runtime is older than the one
  # these binaries were linked against (`GLIBCXX_... not found`).
  mkdir -p "$bundle/runtime-fallback"
  for exe in "$bundle"/bin/*; do
    ldd "$exe" | awk '/(libstdc\+\+|libgcc_s)[.]so.* => \// { print $3 }'
  done | sort -u | xargs -r -I{} cp -L {} "$bundle/runtime-fallback/"
  # The libraries travel compressed (OpenBLAS alone is 36 MB; the carry limit is 64 MiB);
  # --run unpacks them there.
  tar -C "$bundle" -czf "$bundle/libs.tar.gz" lib runtime-fallback
  rm -rf "$bundle/lib" "$bundle/runtime-fallback"
  local mib
  mib=$(du -sm "$bundle" | cut -f1)
  echo "bundle: $bundle (${mib} MiB)"
  ls -l "$bundle/bin" "$bundle/libs.tar.gz"
  if (( mib >= max_bundle_mib )); then
    echo "bundle is ${mib} MiB, over the ${max_bundle_mib} MiB carry limit" >&2
    exit 1
  fi
}

run_step() {
  local sanitize=$1
  local out=${OUT:-$root/gpu-check-out}
  mkdir -p "$out"
  [[ -x "$bundle/bin/test_gpu" ]] || { echo "no bundle at $bundle: run --bundle first and carry build-gpu/bundle" >&2; exit 1; }
  if [[ -f "$bundle/libs.tar.gz" && ! -d "$bundle/lib" ]]; then tar -C "$bundle" -xzf "$bundle/libs.tar.gz"; fi
  local ld="$bundle/lib"
  [[ -d /usr/local/cuda/lib64 ]] && ld="$ld:/usr/local/cuda/lib64"
  # cuDNN/NCCL (and sometimes cuBLAS) ship inside Python wheels on the device image.
  local d
  for d in $(python3 -c 'import glob, site, sys; [print(p) for s in site.getsitepackages() for p in glob.glob(s + "/nvidia/*/lib")]' 2>/dev/null || true); do
    ld="$ld:$d"
  done
  export LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ldd "$bundle/bin/test_gpu" 2>&1 | grep -q "GLIBCXX\|CXXABI\|GCC_"; then
    echo "device C++ runtime too old for this build: using the bundle's runtime-fallback" | tee -a "$out/summary.txt"
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$bundle/runtime-fallback"
  fi
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" | tee "$out/env.txt"
  (nvidia-smi || true) 2>&1 | tee "$out/nvidia-smi.txt"
  ldd "$bundle/bin/test_gpu" > "$out/ldd-test_gpu.txt" 2>&1 || true
  # Built architectures, runtime and driver versions, whether each GPU can run this build,
  # cuDNN, NCCL's net plugin: the facts a failure below is read against.
  timeout 60 "$bundle/bin/lansbert" info 2>&1 | tee "$out/lansbert-info.txt" | grep -E "CUDA backend|^    \[|cuDNN" |
    tee -a "$out/summary.txt" || true
  local rc=0
  # Capped (TEST_TIMEOUT seconds in all): a test that hangs on its first run on a GPU (a
  # kernel, an NCCL set-up) must not take the e2e and bench steps down with it.
  local tt=${TEST_TIMEOUT:-240}
  if [[ "$sanitize" == 1 ]] && command -v compute-sanitizer > /dev/null; then
    timeout "$tt" compute-sanitizer --tool memcheck --error-exitcode 9 "$bundle/bin/test_gpu" 2>&1 |
      tee "$out/test_gpu-memcheck.txt" || rc=$?
    echo "test_gpu exit status $rc" | tee -a "$out/summary.txt"
    # Shared-memory races and barrier misuse inside a block: what the emulator's one-fiber-at-a-
    # time lanes cannot show, in the kernels that exchange data through shared memory.
    local tool r
    for tool in racecheck synccheck; do
      r=0
      timeout "$tt" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bundle/bin/test_gpu" \
        --gtest_filter='GpuFlashAttention.*:GpuResidualLayerNorm*:GpuOps.*LayerNorm*:GpuOps.*Softmax*' 2>&1 |
        tee "$out/test_gpu-$tool.txt" || r=$?
      echo "test_gpu under $tool: exit status $r" | tee -a "$out/summary.txt"
      (( r == 0 )) || rc=$r
    done
  else
    gpu_tests_one_by_one "$out" "$tt" || rc=$?
  fi
  e2e_step "$out" || rc=$?
  if [[ $("$bundle/bin/lansbert" bench --help 2>&1 || true) == *--backend* ]]; then
    bench_step "$out"
  else
    echo "lansbert bench has no --backend option in this build; bench skipped" | tee -a "$out/summary.txt"
  fi
  # The one-time lines that say a fused path was not taken on this GPU and library (cuBLASLt
  # epilogues refused or disagreeing, flash attention's reason): runs still pass, slower.
  echo "fallback and epilogue lines (count, text):" >> "$out/summary.txt"
  local logs=()
  mapfile -t logs < <(find "$out" -maxdepth 1 \( -name '*.txt' -o -name '*.err' \) ! -name summary.txt | sort)
  { grep -h "lansbert: cuBLASLt\|hand-written attention (" "${logs[@]}" 2>/dev/null || true; } |
    grep -v "epilogue used" | sort | uniq -c | sort -rn | head -20 >> "$out/summary.txt" || true
  return $rc
}

# Every gpu test in a process of its own (TEST_EACH_TIMEOUT seconds each, TEST_TIMEOUT in
# all): on a first GPU run a failed CUDA call is fatal to its process (lansbert::fatal_error),
# and one such test must not hide the results of all the tests after it. A process costs a
# CUDA context set-up (well under a second), a small price for that.
gpu_tests_one_by_one() {
  local out=$1 budget=$2 start=$SECONDS rc=0 r name
  local -a tests
  mapfile -t tests < <("$bundle/bin/test_gpu" --gtest_list_tests | awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }')
  : > "$out/test_gpu.txt"
  mkdir -p "$out/test_gpu-xml"
  local passed=0 skipped=0 failed=()
  for name in "${tests[@]}"; do
    if (( SECONDS - start > budget )); then
      failed+=("$name(not-run:budget)")
      rc=124
      continue
    fi
    r=0
    timeout "${TEST_EACH_TIMEOUT:-60}" "$bundle/bin/test_gpu" --gtest_filter="$name" \
      --gtest_output="xml:$out/test_gpu-xml/${name//\//_}.xml" > "$out/test_gpu-last.txt" 2>&1 || r=$?
    cat "$out/test_gpu-last.txt" >> "$out/test_gpu.txt"
    if (( r != 0 )); then
      failed+=("$name(exit-$r)")
      rc=$r
    elif grep -q '\[  SKIPPED \]' "$out/test_gpu-last.txt"; then
      skipped=$((skipped + 1))
    else
      passed=$((passed + 1))
    fi
  done
  rm -f "$out/test_gpu-last.txt"
  echo "test_gpu: ${#tests[@]} tests, $passed passed, $skipped skipped, ${#failed[@]} failed or not run: ${failed[*]}" |
    tee -a "$out/summary.txt"
  echo "test_gpu exit status $rc" | tee -a "$out/summary.txt"
  return $rc
}

# The command line end to end on the device: tiny synthetic shards, `lansbert train` for 20
# steps in fp32 and in bf16 with a held-out evaluation at the end, `lansbert eval` of the
# bf16 checkpoint, and `bench-comm --backend cuda` (NCCL on one rank: its set-up and device
# buffers). E2E_BACKEND=cpu runs the same steps on the CPU (to check this script anywhere).
e2e_step() {
  local out=$1 lb="$bundle/bin/lansbert" mk="$bundle/bin/make_train_test_data" be=${E2E_BACKEND:-cuda}
  local d="$out/e2e" rc=0 prec
  if [[ ! -x $mk ]]; then echo "e2e: no make_train_test_data in the bundle; skipped" | tee -a "$out/summary.txt"; return 0; fi
  rm -rf "$d"; mkdir -p "$d"
  "$mk" "$d/data" > "$d/make-data.txt" 2>&1 || { echo "e2e: make_train_test_data failed" | tee -a "$out/summary.txt"; return 1; }
  cat > "$d/tiny.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$d/data/shards/*.lbs"], eval: ["$d/data/shards/*.lbs"], vocab: $d/data/vocab.txt, seq_len: 32, max_pred: 5}
batch: {global_batch: 32, micro_batch: 16}
optimizer: {lr: 0.02}
schedule: {total_steps: 20, warmup_ratio: 0.1}
checkpoint: {every_steps: 0}
logging: {every_steps: 5}
evaluation: {max_sequences: 256}
backend: $be
YAML
  # bf16-recompute: batch.recompute; its eval line should equal bf16's (the same bits on the CPU).
  # bf16-attn: precision.attention auto, cuDNN's attention with attention dropout in training
  # (its eval line should be close to bf16's, not equal: bf16 attention inside).
  for prec in fp32 bf16 bf16-recompute bf16-attn; do
    local extra=()
    [[ $prec == *-recompute ]] && extra=(--set batch.recompute=layers)
    [[ $prec == *-attn ]] && extra=(--set precision.attention=auto)
    timeout "${E2E_TIMEOUT:-120}" "$lb" train --config "$d/tiny.yaml" --set "checkpoint.dir=$d/ckpt-$prec" \
      --set "precision.dtype=${prec%-*}" ${extra[@]+"${extra[@]}"} > "$out/e2e-train-$prec.txt" 2>&1 || rc=1
    echo "e2e train $prec: $(grep -c '^step' "$out/e2e-train-$prec.txt") log lines; $(grep 'eval after' "$out/e2e-train-$prec.txt")" \
      | tee -a "$out/summary.txt"
  done
  timeout 60 "$lb" eval --checkpoint "$d/ckpt-bf16" --max-sequences 256 --backend "$be" > "$out/e2e-eval.txt" 2>&1 || rc=1
  tail -1 "$out/e2e-eval.txt" | sed 's/^/e2e eval: /' | tee -a "$out/summary.txt"
  if [[ $be == cuda ]]; then
    timeout 60 "$lb" bench-comm --backend cuda --max-bytes 64M --iters 5 --warmup 2 > "$out/e2e-bench-comm.txt" 2>&1 || rc=1
    grep -q WRONG "$out/e2e-bench-comm.txt" && rc=1
  fi
  echo "e2e exit status $rc" | tee -a "$out/summary.txt"
  return $rc
}

# lansbert bench on the device: bert-base and bert-large at seq 128 / 20 masked slots and
# 512 / 80, fp32, TF32 and bf16 GEMMs (bf16 three ways: cast kernels, the same without cast
# reuse, conversion inside cuBLAS),
# LANS update timed; one JSON line per run in bench.jsonl and the text form in bench-*.txt.
# Then the largest micro-batch probe (--batch 0) and a per-op profile. Each run is capped
# (BENCH_TIMEOUT seconds) so one hang cannot eat the lease.
# bench_json TAG LABEL MODEL:SEQ:PRED:BATCH ARGS...: one timed `bench --json` line into
# bench.jsonl, its stderr in bench-MODEL-SEQ-TAG.err; a failure is named by LABEL in the
# summary. Uses bench_step's out, t and lb.
bench_json() {
  local tag=$1 label=$2 model seq pred batch
  IFS=: read -r model seq pred batch <<< "$3"
  shift 3
  timeout "$t" "$lb" bench --backend cuda "$@" --model "$model" --seq-len "$seq" --max-pred "$pred" \
    --batch "$batch" --steps 5 --warmup 2 --json 2> "$out/bench-$model-$seq-$tag.err" \
    | tee -a "$out/bench.jsonl" || echo "bench $model $seq $label: exit $?" | tee -a "$out/summary.txt"
}

bench_step() {
  local out=$1 t=${BENCH_TIMEOUT:-90} lb="$bundle/bin/lansbert"
  local spec prec
  # Which options this build's bench has (the help read once, whole: grep -q on a pipe can
  # end the writer with SIGPIPE, which pipefail would read as "no").
  local bench_help
  bench_help=$("$lb" bench --help 2>&1 || true)
  bench_has() { [[ $bench_help == *"$1"* ]]; }
  : > "$out/bench.jsonl"
  for spec in bert-base:128:20:64 bert-base:512:80:16 bert-large:128:20:32 bert-large:512:80:8; do
    # bf16-cublas: bf16 with the operands converted inside cuBLAS (--gemm-cast cublas) instead of
    # by the cast kernels: which of the two is faster decides precision.gemm_cast's default.
    # bf16-noreuse: the cast kernels without cast reuse (--cast-reuse off), what reuse saves.
    for prec in fp32 tf32 bf16 bf16-cublas bf16-noreuse; do
      local args=(--precision "${prec%-*}")
      [[ $prec == *-cublas ]] && args+=(--gemm-cast cublas)
      [[ $prec == *-noreuse ]] && args+=(--cast-reuse off)
      bench_json "$prec" "$prec" "$spec" "${args[@]}"
    done
  done
  # cuDNN's fused attention (with the model's attention dropout, through lansbert's keep mask),
  # when this build has it; compare with the bf16 lines above.
  if bench_has '--attention'; then
    for spec in bert-base:128:20:64 bert-large:512:80:8; do
      bench_json attn "attention auto" "$spec" --precision bf16 --attention auto
    done
  fi
  # lansbert's own flash attention (never run on a GPU before): the bf16 lines above with it.
  if bench_has 'flash'; then
    for spec in bert-base:128:20:64 bert-large:128:20:32 bert-large:512:80:8; do
      bench_json flash "attention flash" "$spec" --precision bf16 --attention flash
    done
  fi
  # ... and with 16-bit activations as well (never run on a GPU before either).
  if bench_has '--activations'; then
    for spec in bert-large:128:20:32 bert-large:512:80:8; do
      bench_json flash-ffn16 "flash + 16-bit FFN" "$spec" --precision bf16 --attention flash --activations 16bit
    done
  fi
  # Padding and packing (never run on a GPU): bert-large at 512 with sequences of 128 tokens,
  # each padded in a row of its own and packed four to a row (data.packing), the flash
  # attention skipping the tiles no query sees; seq/s is the number to compare.
  if bench_has '--packing'; then
    bench_json flash-padded "flash, 128 of 512 tokens, padded" bert-large:512:80:16 --precision bf16 \
      --attention flash --activations 16bit --tokens-per-sequence 128
    bench_json flash-packed "flash, 128 of 512 tokens, packed" bert-large:512:80:16 --precision bf16 \
      --attention flash --activations 16bit --tokens-per-sequence 128 --packing
  fi
  # ... and with the tanh GELU in the FFN GEMMs' cuBLASLt epilogues (the .err files say whether
  # the one-time checks let them in).
  if bench_has '--hidden-act'; then
    for spec in bert-large:128:20:32 bert-large:512:80:8; do
      bench_json flash-ffn16-tanh "flash + 16-bit FFN + tanh GELU epilogues" "$spec" --precision bf16 \
        --attention flash --activations 16bit --hidden-act gelu_tanh
    done
    # What cuBLASLt said of the epilogues (offered? agreeing with the unfused kernels?).
    cat "$out"/bench-*-flash-ffn16-tanh.err 2>/dev/null | grep "cuBLASLt" | sort -u | sed 's/^/epilogues: /' |
      tee -a "$out/summary.txt" || true
  fi
  timeout "$t" "$lb" bench --backend cuda --precision bf16 --model bert-large --seq-len 512 --max-pred 80 --batch 0 \
    --steps 2 --warmup 1 2>&1 | tee "$out/bench-bert-large-512-probe.txt" || true
  # The same probe with activation recomputation: how much larger a micro-batch fits, at what MFU.
  for mode in attention layers; do
    timeout "$t" "$lb" bench --backend cuda --precision bf16 --model bert-large --seq-len 512 --max-pred 80 --batch 0 \
      --recompute $mode --steps 2 --warmup 1 2>&1 | tee "$out/bench-bert-large-512-probe-recompute-$mode.txt" || true
  done
  # ... and for the fastest configuration by the roofline count (the flash attention with 16-bit
  # activations, whose arena holds the least: no [B, A, S, S] memory without recomputation), at
  # both lengths, when this build has it.
  if bench_has '--activations'; then
    for spec in 128:20 512:80; do
      timeout "$t" "$lb" bench --backend cuda --precision bf16 --attention flash --activations 16bit \
        --model bert-large \
        --seq-len "${spec%:*}" --max-pred "${spec#*:}" --batch 0 --steps 2 --warmup 1 2>&1 |
        tee "$out/bench-bert-large-${spec%:*}-probe-flash-16bit.txt" || true
    done
  fi
  # Per op: time, achieved rate and the roofline floor on this GPU (the step's floor caps MFU).
  timeout "$t" "$lb" bench --backend cuda --precision bf16 --model bert-large --seq-len 128 --max-pred 20 --batch 32 \
    --steps 3 --profile 2>&1 | tee "$out/bench-bert-large-128-profile.txt" || true
  # (with 16-bit activations when this build has them: the configuration docs/performance.md
  # counts the lowest floor for)
  act=()
  bench_has '--activations' && act=(--activations 16bit)
  timeout "$t" "$lb" bench --backend cuda --precision bf16 --attention flash "${act[@]}" --model bert-large \
    --seq-len 512 --max-pred 80 --batch 8 --steps 3 --profile 2>&1 | tee "$out/bench-bert-large-512-flash-profile.txt" || true
  # Their floor lines (the modelled floor and the measured step's multiple of it) in the summary.
  grep "roofline floor" "$out/bench-bert-large-128-profile.txt" | sed 's/^ */profile: /' | tee -a "$out/summary.txt" || true
  grep "roofline floor" "$out/bench-bert-large-512-flash-profile.txt" | sed "s/^ */profile 512 flash ${act[*]}: /" |
    tee -a "$out/summary.txt" || true
  # The table for docs/performance.md (its note on skipped lines goes to the summary).
  python3 "$root/scripts/bench-table.py" "$out/bench.jsonl" > "$out/bench.md" 2>> "$out/summary.txt" ||
    echo "bench-table: no bench results" | tee -a "$out/summary.txt"
}

case "${1:-}" in
  --bundle) bundle_step ;;
  --run) run_step "$([[ "${2:-}" == --sanitize ]] && echo 1 || echo 0)" ;;
  *) echo "usage: $0 --bundle | --run [--sanitize]" >&2; exit 2 ;;
esac
