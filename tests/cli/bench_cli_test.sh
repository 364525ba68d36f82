#!/usr/bin/env bash
# `lansbert bench` from the command line: a CPU run prints its JSON line, and each option
# that does not apply (a CUDA-only choice on the CPU, contradictory precisions, unknown
# values) exits non-zero with a message that names the option; --profile --roofline prints
# per-op rows and the floor line; scripts/bench-table.py turns
# the JSON lines into a markdown table; --recompute attention|layers keep the loss and shrink
# the arena; --tokens-per-sequence and --packing give padded and packed rows.
# `lansbert bench-comm` on one process: --order takes
# the config's names and the old ones, and a bad --order or LANSBERT_COMM is refused by name.
# Usage: bench_cli_test.sh LANSBERT SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
tiny=(bench --model bert-tiny --seq-len 32 --batch 2 --steps 1 --warmup 0 --threads 1)

out=$("$bin" "${tiny[@]}" --json)
[[ $out == '{"model":"bert-tiny","backend":"cpu","precision":"fp32"'* ]] || fail "json: $out"
[[ $out =~ \"tokens_per_s\":([0-9.]+) ]] || fail "no tokens_per_s: $out"
[[ ${BASH_REMATCH[1]} != 0.0 ]] || fail "zero throughput: $out"
out2=$("$bin" "${tiny[@]}" --json --precision bf16)
[[ $out2 == *'"precision":"bf16"'* ]] || fail "bf16 emulation: $out2"
# bf16 counts its GEMM operand casts; without cast reuse there are more of them.
[[ $out2 =~ \"gemm_cast_elements_per_step\":([0-9]+),\"gemm_copy_writes_per_step\":([0-9]+),\"cast_reuse\":\"on\" ]] ||
  fail "no cast count: $out2"
casts_on=${BASH_REMATCH[1]}
(( BASH_REMATCH[2] > 0 )) || fail "no 16-bit copies written by their producing ops: $out2"
out3=$("$bin" "${tiny[@]}" --json --precision bf16 --cast-reuse off)
[[ $out3 =~ \"gemm_cast_elements_per_step\":([0-9]+),\"gemm_copy_writes_per_step\":0,\"cast_reuse\":\"off\" ]] ||
  fail "no cast count, or copies written without reuse: $out3"
(( BASH_REMATCH[1] > casts_on )) || fail "cast reuse saved nothing: ${BASH_REMATCH[1]} vs $casts_on"
# With an optimizer (and a warm-up update) the weights come from the copy the update writes:
# one parameter buffer (the parameters plus the table's alignment gaps) fewer casts a step.
out4=$("$bin" bench --model bert-tiny --seq-len 32 --batch 2 --steps 1 --warmup 1 --threads 1 --json --precision bf16 \
  --optimizer lans)
[[ $out4 =~ \"params\":([0-9]+) ]] || fail "no params: $out4"
params=${BASH_REMATCH[1]}
[[ $out4 =~ \"gemm_cast_elements_per_step\":([0-9]+) ]] || fail "no cast count: $out4"
saved=$(( casts_on - BASH_REMATCH[1] ))
(( saved >= params && saved < params + 4096 )) || fail "weight copy saved $saved casts, want the $params parameters"

# --tokens-per-sequence pads each row; --packing packs them as data.packing does: 8 sequences of
# 10 tokens fill 3 rows of 32 (3, 3, 2), and tokens/s and GFLOP/s count those rows' positions.
tiny8=(bench --model bert-tiny --seq-len 32 --batch 8 --steps 1 --warmup 0 --threads 1 --max-pred 3)
out6=$("$bin" "${tiny8[@]}" --json --tokens-per-sequence 10)
[[ $out6 == *'"rows":8,"fill":0.3125,"packing":false'* ]] || fail "padded rows: $out6"
out7=$("$bin" "${tiny8[@]}" --json --tokens-per-sequence 10 --packing)
[[ $out7 == *'"rows":3,"fill":0.8333,"packing":true'* ]] || fail "packed rows: $out7"
[[ $out7 =~ \"step_ms\":([0-9.]+),\"tokens_per_s\":([0-9.]+),\"sequences_per_s\":([0-9.]+) ]] || fail "no rates: $out7"
python3 -c "import sys; s, t, q = map(float, sys.argv[1:]); sys.exit(not (abs(t - 96e3 / s) <= 0.06 * t and abs(q - 8e3 / s) <= 0.01 * q))" \
  "${BASH_REMATCH[@]:1}" || fail "packed rates are not of 3 rows and 8 sequences: $out7"
[[ $(python3 "$src/scripts/bench-table.py" <<< "$out7" | sed -n 3p) == '| bert-tiny | 32 | 8 (packed in 3 rows, fill 0.83) |'* ]] ||
  fail "bench-table packed row"
# The default masked slots follow the sequence's tokens (20 per 128): 10 tokens, 2 slots.
out8=$("$bin" bench --model bert-tiny --seq-len 32 --batch 2 --steps 1 --warmup 0 --threads 1 --json --tokens-per-sequence 10)
[[ $out8 == *'"seq_len":32,"max_pred":2,'* ]] || fail "default slots of 10-token sequences: $out8"
for bad in "--tokens-per-sequence 33" "--tokens-per-sequence 2"; do
  set +e
  err=$("$bin" "${tiny8[@]}" $bad 2>&1 >/dev/null); rc=$?
  set -e
  (( rc != 0 )) && [[ $err == *"--tokens-per-sequence"* ]] || fail "bench $bad: exit $rc, $err"
done

# --recompute attention|layers: the same loss from a smaller arena, layers the smallest; bench-table
# marks the row.
[[ $out =~ \"loss\":([0-9.]+),\"recompute\":\"none\",\"activation_bytes\":([0-9]+) ]] || fail "no recompute fields: $out"
loss=${BASH_REMATCH[1]} arena=${BASH_REMATCH[2]}
for mode in attention layers; do
  out5=$("$bin" "${tiny[@]}" --json --recompute $mode)
  [[ $out5 =~ \"loss\":([0-9.]+),\"recompute\":\"$mode\",\"activation_bytes\":([0-9]+) ]] || fail "no recompute fields: $out5"
  [[ ${BASH_REMATCH[1]} == "$loss" ]] || fail "recompute $mode changed the loss: ${BASH_REMATCH[1]} vs $loss"
  (( BASH_REMATCH[2] < arena )) || fail "recompute $mode did not shrink the arena: ${BASH_REMATCH[2]} vs $arena"
  arena=${BASH_REMATCH[2]}
  [[ $(python3 "$src/scripts/bench-table.py" <<< "$out5" | sed -n 3p) == "| bert-tiny | 32 | 2 (recompute $mode) |"* ]] ||
    fail "bench-table recompute $mode row"
done
# bench-table.py: a header, a separator and one row per result; other lines are skipped.
table=$(printf '%s\nlansbert: error: something\n%s\n' "$out" "$out2" | python3 "$src/scripts/bench-table.py" 2>/dev/null)
[[ $(wc -l <<< "$table") == 4 ]] || fail "bench-table rows: $table"
[[ $(sed -n 1p <<< "$table") == '| model | seq | batch | GEMMs |'* ]] || fail "bench-table header: $table"
[[ $(sed -n 4p <<< "$table") == '| bert-tiny | 32 | 2 | bf16 | native |'* ]] || fail "bench-table bf16 row: $table"
[[ $(python3 "$src/scripts/bench-table.py" <<< "$out3" | sed -n 3p) == '| bert-tiny | 32 | 2 | bf16 (no cast reuse) |'* ]] ||
  fail "bench-table no-reuse row"
if echo "not json" | python3 "$src/scripts/bench-table.py" > /dev/null 2>&1; then fail "bench-table exit 0 without results"; fi

# expect_error WANT ARGS...: exit non-zero, WANT in stderr+stdout.
expect_error() {
  local want=$1; shift
  local err rc
  set +e
  err=$("$bin" "${tiny[@]}" "$@" 2>&1); rc=$?
  set -e
  (( rc != 0 )) || fail "exit 0 for: $*"
  [[ $err == *"$want"* ]] || fail "for '$*' expected '$want' in: $err"
}
expect_error "--gemm-cast cublas needs --backend cuda" --precision bf16 --gemm-cast cublas
# Numbers CLI11 alone would take: NaN passes its ranges, and -1 wraps an unsigned seed.
expect_error "--peak-gflops: 'nan' is not a number in [0.001, 1e+12]" --peak-gflops nan
expect_error "--peak-gflops: '0' is not a number" --peak-gflops 0
expect_error "--seed: '-1': the seed is unsigned 64-bit" --seed -1
# Each range names the option that is out of it.
set +e
err=$("$bin" bench --model bert-tiny --seq-len 2 --batch 1 2>&1)
set -e
[[ $err == *"bench: --seq-len 2: need 3 <= it <= 512 (the model's max_positions)"* ]] || fail "--seq-len 2: $err"
expect_error "bench: --max-pred 32: need it below --seq-len (32)" --max-pred 32
expect_error "--gemm-cast" --gemm-cast fast
expect_error "--cast-reuse" --precision bf16 --cast-reuse maybe
expect_error "--recompute" --recompute true
expect_error "--attention cudnn needs --backend cuda" --attention cudnn
expect_error "--attention: expected native, cudnn, auto or flash, got 'fast'" --attention fast
expect_error "--tf32 contradicts --precision bf16" --tf32 --precision bf16
expect_error "--precision" --precision int8
expect_error "--backend: expected cpu or cuda" --backend tpu
expect_error "--roofline: unknown GPU model 'b200' (known: H200," --profile --roofline b200
expect_error "--roofline needs --profile" --roofline h200
expect_error "--activations: expected fp32, or 16bit with --precision bf16 or fp16" --activations 16bit
expect_error "--activations: expected fp32, or 16bit" --precision bf16 --activations half

# --profile --roofline: the hand-written attention's GEMMs and softmax are rows of their own, GEMM
# rows carry FLOPs, the others bytes only; the floor line names the device's peaks (a CPU step is
# not compared with it). The FLOP and byte counts themselves: tests/model/profiling_traffic_test.cc.
prof=$("$bin" "${tiny[@]}" --precision bf16 --profile --roofline h200)
prof_fp32=$("$bin" "${tiny[@]}" --profile)
[[ $prof == *"roofline floor on H200 (989 TFLOP/s bf16, 4.80 TB/s)"*"MFU at most "* ]] || fail "no floor line: $prof"
[[ $prof != *"the measured step is"* ]] || fail "a CPU step compared with an H200 floor: $prof"
grep -q "^  gemm_batched " <<< "$prof" || fail "attention GEMMs not expanded: $prof"
grep -q "^  softmax_dropout_forward " <<< "$prof" || fail "attention softmax not expanded: $prof"
! grep -q "^  attention_forward " <<< "$prof" || fail "hand-written attention timed as one op: $prof"
awk '$1 == "gemm" && $5 > 0 {ok = 1} END {exit !ok}' <<< "$prof" || fail "gemm row without FLOPs: $prof"
# --json keeps to one line: the profile and the floor are fields of the object.
pj=$("$bin" "${tiny[@]}" --precision bf16 --profile --roofline h200 --json)
[[ $(wc -l <<< "$pj") == 1 ]] || fail "--json --profile printed more than one line: $pj"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
rows = {r["op"]: r for r in d["profile"]}
assert rows["gemm"]["gflop"] > 0 and rows["gemm"]["floor_ms"] > 0, rows["gemm"]
assert rows["layernorm_forward"]["gflop"] == 0 and rows["layernorm_forward"]["mb"] > 0, rows["layernorm_forward"]
assert d["roofline_device"] == "H200" and 0 < d["roofline_mfu_ceiling"] < 1, d
assert d["mfu"] is None, d  # no peak for the CPU: null, not 0
assert abs(sum(r["floor_ms"] for r in d["profile"]) - d["roofline_floor_ms"]) < 1e-3 * d["roofline_floor_ms"] + 3e-3
' "$pj" || fail "--json --profile fields: $pj"
awk '$1 == "layernorm_forward" && $5 == "-" && $6 > 0 {ok = 1} END {exit !ok}' <<< "$prof" ||
  fail "layernorm row without bytes, or with FLOPs: $prof"

# --attention flash on the CPU (the flash attention's twin): rows of its own instead of the
# composition's, no [B, A, S, S] softmax pass, and the hand-written attention's loss (fp32: the
# same function with the same dropout masks).
fl=$("$bin" "${tiny[@]}" --attention flash --profile)
[[ $fl == *"flash attention"* ]] || fail "bench header does not say flash: $fl"
grep -q "^  flash_attention_forward " <<< "$fl" || fail "no flash forward row: $fl"
grep -q "^  flash_attention_backward " <<< "$fl" || fail "no flash backward row: $fl"
! grep -q "^  softmax_dropout_forward " <<< "$fl" || fail "flash run still has the softmax pass: $fl"
loss_of() { grep -o "loss [0-9.]*" <<< "$1"; }
[[ -n $(loss_of "$fl") && $(loss_of "$fl") == $(loss_of "$prof_fp32") ]] ||
  fail "flash loss '$(loss_of "$fl")' is not the hand-written attention's '$(loss_of "$prof_fp32")'"

# --activations 16bit: the FFN's pre-activation in bf16, so its GELU rows move fewer bytes
# (the pre-activation read at 2 bytes, not 4), and the loss stays within bf16 rounding (that
# the path changes bits: tests/model/half_activations_test.cc).
hf=$("$bin" "${tiny[@]}" --precision bf16 --activations 16bit --profile)
[[ $hf == *"16-bit activations"* ]] || fail "bench header does not say 16-bit activations: $hf"
mb_of() { awk -v op="$1" '$1 == op {print $6}' <<< "$2"; }
python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (0 < a < b))' \
  "$(mb_of gelu_forward "$hf")" "$(mb_of gelu_forward "$prof")" || fail "16-bit gelu_forward does not move fewer bytes: $hf"
python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(not abs(a - b) < 1e-2 * b)' \
  "$(loss_of "$hf" | cut -d' ' -f2)" "$(loss_of "$prof" | cut -d' ' -f2)" ||
  fail "16-bit FFN loss '$(loss_of "$hf")' vs fp32-stored '$(loss_of "$prof")': not within 1%"
hfj=$("$bin" "${tiny[@]}" --precision fp16 --activations 16bit --json)
[[ $hfj == *'"activations":"16bit"'* ]] || fail "--json does not report activations: $hfj"
[[ $(python3 "$src/scripts/bench-table.py" <<< "$hfj" | sed -n 3p) == *'| fp16, 16-bit activations |'* ]] ||
  fail "bench-table does not mark the 16-bit FFN row"

# --hidden-act gelu_tanh with 16-bit activations: the FFN's GEMMs are charged with the GELU in
# their epilogues (rows of their own, FLOP-bound), no gelu_forward / bias_gelu_backward passes of
# the encoder's FFN remain (the MLM transform's stay), and the JSON and the
# table say so; an unknown activation is refused.
th=$("$bin" "${tiny[@]}" --precision bf16 --activations 16bit --hidden-act gelu_tanh --profile --roofline h200)
[[ $th == *"tanh GELU"* ]] || fail "bench header does not say tanh GELU: $th"
for op in gemm_bias_gelu gemm_dgelu_bias; do
  awk -v op=$op '$1 == op && $5 > 0 {ok = 1} END {exit !ok}' <<< "$th" || fail "no FLOP-bound $op row: $th"
done
! grep -q "^  gelu_forward " <<< "$th" || fail "a tanh run still has the FFN's gelu_forward pass: $th"
awk '$1 == "bias_gelu_backward" && $3 == 1 {ok = 1} END {exit !ok}' <<< "$th" ||
  fail "a tanh run still has the FFN's GELU backward passes (the MLM transform's is the one left): $th"
thj=$("$bin" "${tiny[@]}" --precision bf16 --activations 16bit --hidden-act gelu_tanh --json)
[[ $thj == *'"hidden_act":"gelu_tanh"'* ]] || fail "--json does not report hidden_act: $thj"
[[ $(python3 "$src/scripts/bench-table.py" <<< "$thj" | sed -n 3p) == *'| bf16, 16-bit activations, tanh GELU |'* ]] ||
  fail "bench-table does not mark the tanh GELU row"
expect_error "model.hidden_act: unknown activation 'relu'" --hidden-act relu

# expect_fail WANT RC CMD...: CMD exits with RC, WANT in stderr+stdout.
expect_fail() {
  local want=$1 want_rc=$2; shift 2
  local err rc
  set +e
  err=$("$@" 2>&1); rc=$?
  set -e
  (( rc == want_rc )) || fail "exit $rc (want $want_rc) for: $*: $err"
  [[ $err == *"$want"* ]] || fail "for '$*' expected '$want' in: $err"
}

# A micro-batch no host holds is refused before anything is allocated (it once ended in a
# fatal allocation failure), with exit 2 and a --batch that fits here.
expect_fail "bench: --batch 1000000 needs about" 2 "$bin" bench --model bert-large --batch 1000000
expect_fail "of this host's memory; --batch " 2 "$bin" bench --model bert-large --batch 1000000

# bench-comm --order: the config's names (distributed.reduction_order: fast | fixed), and
# native | fixed_order as aliases; the header names the order in the config's words.
comm=(bench-comm --max-bytes 1K --iters 1 --warmup 0)
for spelling in fast:fast fixed:fixed native:fast fixed_order:fixed; do
  out=$(LANSBERT_COMM=single "$bin" "${comm[@]}" --order "${spelling%%:*}") || fail "--order ${spelling%%:*} failed"
  [[ $out == *"communicator single (${spelling#*:} order)"* ]] || fail "--order ${spelling%%:*}: $out"
done
expect_fail "--order: expected fast or fixed (aliases: native, fixed_order), got 'ring'" 2 \
  env LANSBERT_COMM=single "$bin" "${comm[@]}" --order ring
[[ $("$bin" bench-comm --help) == *"fast (the library's algorithm) | fixed"* ]] || fail "bench-comm --help: --order"
help=$("$bin" bench-comm --help | tr -s ' \n' ' ')
for want in '--min-bytes TEXT=8 ' '--max-bytes TEXT=64M ' '--iters INT:POSITIVE=20 ' '--warmup INT:NONNEGATIVE=5 '; do
  [[ $help == *"$want"* ]] || fail "bench-comm --help lacks the default '$want': $help"
done

# LANSBERT_COMM: single or mpi override the launcher's guess, unset or empty leave it; any
# other value is refused (exit 2) before a command runs, here before train reads its config.
out=$(LANSBERT_COMM= "$bin" "${comm[@]}") || fail "LANSBERT_COMM empty: bench-comm failed"
[[ $out == *"communicator single"* ]] || fail "LANSBERT_COMM empty: $out"
bad_comm="LANSBERT_COMM: expected single or mpi (or unset: MPI under a launcher, one process otherwise), got 'bogus'"
expect_fail "$bad_comm" 2 env LANSBERT_COMM=bogus "$bin" "${comm[@]}"
expect_fail "$bad_comm" 2 env LANSBERT_COMM=bogus "$bin" train --config /nonexistent/lansbert.yaml
LANSBERT_COMM=bogus "$bin" bench-comm --help > /dev/null || fail "LANSBERT_COMM=bogus broke --help"
# Commands that make no communicator do not look at it (a stray value must not stop data prep).
LANSBERT_COMM=bogus "$bin" tokenize --vocab "$src/tests/data/bert-base-uncased-vocab.txt" <<< "hello" > /dev/null ||
  fail "LANSBERT_COMM=bogus refused tokenize"

# --backend cuda: without a device (or without CUDA in the build) a clear refusal; with one,
# a run on it.
set +e
out=$("$bin" "${tiny[@]}" --json --backend cuda 2>&1); rc=$?
set -e
if (( rc != 0 )); then
  [[ $out == *"--backend cuda"* ]] || fail "cuda refusal: $out"
else
  [[ $out == *'"backend":"cuda"'* ]] || fail "cuda run: $out"
fi
echo "bench_cli: ok"
