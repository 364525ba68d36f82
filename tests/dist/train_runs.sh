# Sourced by the command-line training tests that compare runs (dist/train_dist_test.sh,
# emu/cli_emu_test.sh). The caller sets: lb (lansbert), cmp (compare_params), tmp (scratch,
# holding tiny.yaml), mpiexec and flags (its options, an array), fail=0, and may add mpirun
# -x options to mpi_env.
mpi_env=(-x OMP_NUM_THREADS=1)
train() {  # NP NAME ARGS...: runs into $tmp/NAME, log in $tmp/NAME.log (NP 0: without mpirun)
  local np=$1 name=$2; shift 2
  local cmd=("$lb" train --config "$tmp/tiny.yaml" --set "checkpoint.dir=$tmp/$name" "$@")
  (( np > 0 )) && cmd=("$mpiexec" -np "$np" "${flags[@]}" "${mpi_env[@]}" "${cmd[@]}")
  if ! "${cmd[@]}" > "$tmp/$name.log" 2>&1; then
    echo "FAIL: $name (np $np) exited non-zero:"; tail -20 "$tmp/$name.log"; fail=1
  fi
}
same() {  # REF GOT [TOL [TENSOR_TOL]]: final parameters agree (compare_params: the whole
          # model within TOL, default 1e-6; each tensor within TENSOR_TOL, default 10 x TOL)
  echo "$2 vs $1:"
  "$cmp" "$tmp/$1/latest/model.safetensors" "$tmp/$2/latest/model.safetensors" "${@:3}" ||
    { echo "FAIL: $2 differs from $1"; fail=1; }
}
differs() {  # REF GOT TOL WHY: final parameters differ beyond TOL (a path that must have
             # changed them ran): compare_params's exit 1 from finite differences of the same
             # tensors; not exit 2 (a file not read), other tensors or shapes, or NaN
  local rc=0 out=$tmp/$2.differs
  "$cmp" "$tmp/$1/latest/model.safetensors" "$tmp/$2/latest/model.safetensors" "$3" "$3" > "$out" 2>&1 || rc=$?
  if (( rc != 1 )) || grep -q -i -e "missing or of another shape" -e "^FAIL: [0-9]* vs [0-9]* tensors" -e nan "$out" ||
     ! grep -q "^FAIL: [0-9]* tensors compared, ||d||/||p|| [0-9]" "$out"; then
    echo "FAIL: $2 does not differ from $1 as it must ($4): compare_params exit $rc"; cat "$out"; fail=1
  fi
}
