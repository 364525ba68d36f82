#!/usr/bin/env bash
# The CUDA backend from the command line, on the emulator (lansbert_emu: lansbert linked
# against tests/emu): `train --backend cuda` on 1 rank matches the CPU backend; under mpirun
# on 2 emulated devices (NcclCommunicator over the emulator's NCCL, its stream and events,
# the bucketed reduction, the sharded update, a bf16 gradient wire, bf16 GEMMs with the
# layers recomputed) it matches the 1-rank device run, also after a sharded 2-rank
# checkpoint is resumed on 1 device; packed micro-batches (data.packing) through the flash
# kernels match the CPU twin and 2 devices; `eval --backend cuda` prints the CPU's numbers,
# on one device and on two ranks; on an emulated V100 bf16 is refused and fp16 trains; `bench
# --backend cuda --profile` (its FLOP and byte counts equal the CPU backend's), `bench --batch 0`,
# `bench-comm --backend cuda` and `info` run.
# Parameters are compared with compare_params (the attention key biases, whose true gradient
# is zero, are reported, not compared).
# Usage: cli_emu_test.sh LANSBERT_EMU MAKE_TRAIN_TEST_DATA COMPARE_PARAMS SCRATCH MPIEXEC FLAGS...
set -uo pipefail
lb=$1; mk=$2; cmp=$3; tmp=$4; mpiexec=$5; shift 5; flags=("$@")
rm -rf "$tmp"; mkdir -p "$tmp"
export OMP_NUM_THREADS=1 LANSBERT_EMU_DEVICES=2
"$mk" "$tmp/data" >/dev/null || { echo "FAIL: make data"; exit 1; }
fail=0
cat > "$tmp/tiny.yaml" <<YAML
model: {preset: bert-tiny, vocab_size: 64, hidden: 64, heads: 2, intermediate: 128, max_positions: 64}
data: {train: ["$tmp/data/shards/*.lbs"], eval: ["$tmp/data/shards/*.lbs"], vocab: $tmp/data/vocab.txt, seq_len: 32, max_pred: 5}
evaluation: {max_sequences: 16}
batch: {global_batch: 16, micro_batch: 4}
optimizer: {lr: 0.02}
schedule: {total_steps: 4, warmup_ratio: 0.25}
checkpoint: {dir: $tmp/unused, every_steps: 0}
logging: {every_steps: 2, metrics_file: "-"}
distributed: {bucket_mb: 0.05}
YAML
source "$(dirname "$0")/../dist/train_runs.sh"
mpi_env+=(-x LANSBERT_EMU_DEVICES)

train 0 cpu1
train 0 dev1 --set backend=cuda
train 2 dev2 --set backend=cuda
train 2 dev2s --set backend=cuda --set distributed.shard_optimizer=true
train 2 dev2w --set backend=cuda --set distributed.grad_reduce_dtype=bf16
grep -q "lansbert CUDA emulator" "$tmp/dev1.log" || { echo "FAIL: dev1 does not name the emulated device"; fail=1; }
grep -q "gradients reduced in bf16" "$tmp/dev2w.log" || { echo "FAIL: dev2w does not report the bf16 wire"; fail=1; }
# Bounds (whole model, then per tensor: compare_params) about 10x what the emulator gives
# (whole model 3.6e-8, 1.5e-8, 0, 5.2e-5; worst tensor 9.7e-7, 7.6e-8, 0, 1.7e-3); a GPU's
# own summation orders would need tests/gpu's 1e-4.
same cpu1 dev1 1e-6 1e-5
same dev1 dev2 1e-7 1e-6    # 2 ranks add in another order than 1 rank's micro-steps
same dev2 dev2s 1e-7 1e-7   # the sharded update is the replicated one, sliced
same dev2 dev2w 5e-4 2e-2   # gradients rounded to bf16 on the wire...
differs dev2 dev2w 1e-6 "the fp32 wire"  # ...and that wire was used
# bf16 GEMMs: 2 devices, sharded, the layers recomputed in the backward, against 1 device
# (4.0e-8 whole model, 4.1e-7 worst tensor: the 16-bit operands are the same, only fp32
# sums differ in order).
train 0 bf1 --set backend=cuda --set precision.dtype=bf16
train 2 bf2 --set backend=cuda --set precision.dtype=bf16 --set distributed.shard_optimizer=true --set batch.recompute=layers
same bf1 bf2 1e-6 1e-5

# The flash attention's kernels in training (bf16; one head of 64, the size they take): 1
# device against the CPU backend's twin, and 2 sharded devices against 1; none of the runs
# falls back to the hand-written attention.
flash=(--set precision.dtype=bf16 --set precision.attention=flash --set model.heads=1)
train 0 flcpu "${flash[@]}"
train 0 fl1 --set backend=cuda "${flash[@]}"
train 2 fl2 --set backend=cuda "${flash[@]}" --set distributed.shard_optimizer=true
same flcpu fl1 2e-4 4e-3  # 1.5e-5, worst tensor 3.9e-4: a 16-bit rounding may land the other side (fp32 sums in another order)
same fl1 fl2 1e-6 1e-5
grep -l "hand-written attention" "$tmp"/fl*.log && { echo "FAIL: a flash run fell back to the hand-written attention"; fail=1; }
# Packed micro-batches (data.packing) through the flash kernels: the device against the CPU
# twin, and 2 sharded devices against 1 (each rank packs its own micro-batches alike).
train 0 pkcpu "${flash[@]}" --set data.packing=true
train 0 pk1 --set backend=cuda "${flash[@]}" --set data.packing=true
train 2 pk2 --set backend=cuda "${flash[@]}" --set data.packing=true --set distributed.shard_optimizer=true
same pkcpu pk1 2e-4 4e-3  # 8.3e-6, worst tensor 2.3e-4
# 4.2e-6, worst tensor 3.2e-5: 1 and 2 ranks add the micro-batches' fp32 gradients in another
# order, and over 4 steps more bf16 roundings of the packed runs land the other side than of
# the unpacked ones (fp32 packed runs agree to 1.2e-8; no state carries between micro-batches:
# Packing.AMicroBatchAfterALargerOneGivesTheSameBits). Ranks that packed differently would
# differ as pk1 and fl1 do, by 1.2e-2.
same pk1 pk2 2e-5 2e-4
grep -q "^model: .*micro-batch 4 x 32 packed" "$tmp/pk1.log" || { echo "FAIL: pk1 did not pack"; fail=1; }
grep -l "hand-written attention" "$tmp"/pk*.log && { echo "FAIL: a packed flash run fell back to the hand-written attention"; fail=1; }
differs fl1 pk1 1e-7 "the unpacked run: dropout falls elsewhere when packed"

# 16-bit activations in training (bf16): the device against the CPU backend's twin, and not
# the fp32-stored run's parameters (the path ran).
half_activations=(--set precision.dtype=bf16 --set precision.activations=16bit)
train 0 hfcpu "${half_activations[@]}"
train 0 hf1 --set backend=cuda "${half_activations[@]}"
same hfcpu hf1 2e-4 4e-3  # 8.9e-6, worst tensor 1.6e-4
# ... with the flash attention, which then writes d(q, k, v) as 16-bit copies too.
train 0 hffcpu "${flash[@]}" --set precision.activations=16bit
train 0 hff1 --set backend=cuda "${flash[@]}" --set precision.activations=16bit
same hffcpu hff1 2e-4 4e-3  # 9.6e-6, worst tensor 1.5e-4
differs fl1 hff1 1e-7 "the fp32-stored flash run"
differs bf1 hf1 1e-7 "the fp32-stored FFN"

# A sharded 2-device run stopped at step 2 resumes on 1 device (the slices joined) and ends
# where the uninterrupted sharded run ends.
train 2 part --set backend=cuda --set distributed.shard_optimizer=true --stop-at-step 2
train 0 part --set backend=cuda --resume latest
grep -q "resuming from .*step-000000002" "$tmp/part.log" || { echo "FAIL: part did not resume at step 2"; fail=1; }
same dev2s part 1e-7 1e-6

# eval on the device gives the CPU's numbers for the same checkpoint.
ev_dev=$("$lb" eval --checkpoint "$tmp/dev1" --backend cuda 2>&1 | grep "^mlm_loss") || { echo "FAIL: eval --backend cuda"; fail=1; }
ev_cpu=$("$lb" eval --checkpoint "$tmp/dev1" --backend cpu 2>&1 | grep "^mlm_loss")
[[ -n $ev_dev && $ev_dev == "$ev_cpu" ]] || { echo "FAIL: eval on the device: '$ev_dev', on the cpu: '$ev_cpu'"; fail=1; }
# And on two ranks, each on its own emulated device.
ev_dev2=$("$mpiexec" -np 2 "${flags[@]}" -x LANSBERT_EMU_DEVICES "$lb" eval --checkpoint "$tmp/dev1" --backend cuda \
  2>&1 | grep "^mlm_loss") || { echo "FAIL: eval --backend cuda on 2 ranks"; fail=1; }
[[ $ev_dev2 == "$ev_cpu" ]] || { echo "FAIL: eval on 2 devices: '$ev_dev2', on the cpu: '$ev_cpu'"; fail=1; }

# A V100 (sm_70, LANSBERT_EMU_SM): bf16 is refused before anything is written, with the
# setting and the way out named; fp16 with the dynamic loss scaler trains.
LANSBERT_EMU_SM=70 "$lb" train --config "$tmp/tiny.yaml" --set "checkpoint.dir=$tmp/v100bf16" --set backend=cuda \
  --set precision.dtype=bf16 > "$tmp/v100bf16.log" 2>&1 && { echo "FAIL: bf16 on sm_70 was not refused"; fail=1; }
grep -q "precision.dtype: bf16 needs bf16 tensor cores.*use precision.dtype: fp16" "$tmp/v100bf16.log" ||
  { echo "FAIL: the sm_70 bf16 refusal does not say why: $(cat "$tmp/v100bf16.log")"; fail=1; }
[[ -e $tmp/v100bf16 ]] && { echo "FAIL: the refused run wrote $tmp/v100bf16"; fail=1; }
LANSBERT_EMU_SM=70 train 0 v100fp16 --set backend=cuda --set precision.dtype=fp16 --set precision.loss_scale=dynamic
grep -q "eval after step 4/4" "$tmp/v100fp16.log" || { echo "FAIL: fp16 on sm_70 did not finish"; fail=1; }
# ... and runs the flash attention in fp16 (cuDNN's needs sm_80).
LANSBERT_EMU_SM=70 train 0 v100flash --set backend=cuda --set precision.dtype=fp16 --set precision.loss_scale=dynamic \
  --set precision.attention=flash --set model.heads=1
grep -q "eval after step 4/4" "$tmp/v100flash.log" || { echo "FAIL: fp16 flash on sm_70 did not finish"; fail=1; }
grep -q "hand-written attention" "$tmp/v100flash.log" && { echo "FAIL: fp16 flash on sm_70 fell back"; fail=1; }

# bench on the device: the JSON line, MFU against the given peak, the per-op table with an
# H200's roofline floor.
out=$("$lb" bench --backend cuda --model bert-tiny --seq-len 32 --batch 2 --steps 1 --warmup 0 --peak-gflops 1000 \
  --profile --roofline h200 2>&1) || { echo "FAIL: bench --backend cuda: $out"; fail=1; }
for want in "sequences/s" "MFU" "lansbert CUDA emulator" "gemm_batched" "roofline floor on H200"; do
  [[ $out == *"$want"* ]] || { echo "FAIL: bench output lacks '$want': $out"; fail=1; }
done
# The profile's counts on the device equal the CPU backend's, op by op (calls, GEMM FLOPs,
# bytes with the 16-bit conversions and copy writes each backend reports): what the roofline
# floor computed from a CPU run (docs/performance.md) assumes.
# Also with the flash attention, whose CUDA kernels the device runs (bf16, head_dim 64).
counts() {
  "$lb" bench --backend "$1" --attention "$2" --activations "${3:-fp32}" --model bert-tiny --seq-len 32 --batch 4 --steps 1 --warmup 1 \
    --precision bf16 --optimizer lans --profile --roofline h200 --json 2>/dev/null | python3 -c '
import json, sys
for r in sorted(json.loads(sys.stdin.readline())["profile"], key=lambda r: r["op"]):
    print(r["op"], r["calls"], "%.4f" % r["gflop"], "%.3f" % r["mb"])'
}
for attention in native flash; do
  cpu_counts=$(counts cpu $attention) cuda_counts=$(counts cuda $attention)
  [[ $(wc -l <<< "$cpu_counts") -gt 20 ]] || { echo "FAIL: profile rows ($attention): $cpu_counts"; fail=1; }
  [[ $cpu_counts == "$cuda_counts" ]] ||
    { echo "FAIL: profile counts differ, cpu vs cuda ($attention):"; diff <(echo "$cpu_counts") <(echo "$cuda_counts"); fail=1; }
done
[[ $cuda_counts == *"flash_attention_forward"* ]] || { echo "FAIL: no flash rows on the device: $cuda_counts"; fail=1; }
# ... and with 16-bit FFN activations.
cpu_counts=$(counts cpu native 16bit) cuda_counts=$(counts cuda native 16bit)
[[ $(wc -l <<< "$cpu_counts") -gt 20 ]] || { echo "FAIL: profile rows (16-bit FFN): $cpu_counts"; fail=1; }
[[ $cpu_counts == "$cuda_counts" ]] ||
  { echo "FAIL: profile counts differ, cpu vs cuda (16-bit FFN):"; diff <(echo "$cpu_counts") <(echo "$cuda_counts"); fail=1; }
# --batch 0 on a 768 MiB device: the largest micro-batch whose estimate (with its 512 MiB
# margin) fits the free memory, then a step at that size, which must allocate within it.
out=$(LANSBERT_EMU_MEMORY_MIB=768 "$lb" bench --backend cuda --model bert-tiny --seq-len 8 --batch 0 --steps 1 \
  --warmup 0 --json 2>&1) || { echo "FAIL: bench --batch 0: $out"; fail=1; }
[[ $out == *'"batch_probed":true'* && $out =~ \"probe_free_gib\":0\.6 ]] ||
  { echo "FAIL: bench --batch 0 did not probe the 768 MiB device: $out"; fail=1; }
out=$("$mpiexec" -np 2 "${flags[@]}" -x LANSBERT_EMU_DEVICES "$lb" bench-comm --backend cuda --max-bytes 4K --iters 1 \
  --warmup 0 2>&1) || { echo "FAIL: bench-comm --backend cuda: $out"; fail=1; }
[[ $out == *busbw* ]] || { echo "FAIL: bench-comm output lacks busbw: $out"; fail=1; }
out=$("$lb" info 2>&1) || { echo "FAIL: info: $out"; fail=1; }
[[ $out == *"emulated"* ]] || { echo "FAIL: info does not show the emulated build: $out"; fail=1; }
[[ $out == *"fused attention on [0]: "* ]] || { echo "FAIL: info does not say whether device 0 takes cuDNN's attention: $out"; fail=1; }
# A driver older than the runtime (CUDA 12.8 under this build's): the runtime sees no device;
# train and bench say why, with both versions, rather than "no CUDA device visible" (exit 6).
for cmd in "train --config $tmp/tiny.yaml --set checkpoint.dir=$tmp/old-driver --set backend=cuda" \
           "bench --backend cuda --model bert-tiny --seq-len 8 --batch 2 --steps 1"; do
  out=$(LANSBERT_EMU_DRIVER=12080 "$lb" $cmd 2>&1); rc=$?
  (( rc == 6 )) && [[ $out == *"no CUDA device usable: cudaErrorInsufficientDriver (runtime "*", driver 12.8): the driver is older than the CUDA runtime"* ]] ||
    { echo "FAIL: $cmd under an old driver: exit $rc, $out"; fail=1; }
done
[[ -e $tmp/old-driver ]] && { echo "FAIL: the refused run wrote $tmp/old-driver"; fail=1; }
(( fail )) && exit 1
echo "cli on the CUDA emulator: ok"
