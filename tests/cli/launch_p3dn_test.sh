#!/usr/bin/env bash
# scripts/launch/p3dn.sh without --run: the mpirun line it prints for a hostfile (8 ranks
# per host, slots added where a line has none, comments and blank lines skipped, the EFA and
# NCCL settings), --hosts taking the first N hosts, and clear refusals (no hostfile, more
# hosts than it lists, a bad count, no subcommand). Then scripts/launch/p3dn.sbatch, run as
# Slurm would run it but with a stand-in srun: the srun line and the exported settings, the
# same as the mpirun line's, and its refusals.
# Usage: launch_p3dn_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The launchers keep a setting the caller's environment already has: the tests start them
# without any, so that the file's defaults are what they check.
names=$(env -i bash -c "source '$src/scripts/launch/p3dn-env.sh'; printf '%s\n' \"\${P3DN_ENV[@]%%=*}\"")
unset $names
launch() { bash "$src/scripts/launch/p3dn.sh" --binary /opt/lansbert "$@"; }
hostfile_of() { sed -E 's/.*--hostfile ([^ ]+) .*/\1/' <<< "$1"; }  # LINE: the hostfile it wrote
printf '# the cluster\n10.0.1.17\n\n10.0.1.18 slots=8\n10.0.1.19\n' > "$tmp/hosts"

line=$(launch --hostfile "$tmp/hosts" -- train --config c.yaml)
[[ $line == *"mpirun -np 24 --hostfile "* ]] || fail "all three hosts, 24 ranks: $line"
for want in "FI_PROVIDER=efa" "FI_EFA_USE_DEVICE_RDMA=0" 'NCCL_NET=AWS\ Libfabric' "NCCL_DEBUG=WARN" \
            "LANSBERT_COMM=mpi" "LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:" "/opt/lansbert train --config c.yaml"; do
  [[ $line == *"$want"* ]] || fail "no '$want' in: $line"
done
# The hostfile it wrote: three hosts, each with 8 slots.
written=$(hostfile_of "$line")
[[ $(cat "$written") == $'10.0.1.17 slots=8\n10.0.1.18 slots=8\n10.0.1.19 slots=8' ]] ||
  fail "slotted hostfile: $(cat "$written")"
rm -f "$written"
line=$(launch --hostfile "$tmp/hosts" --hosts 2 -- bench-comm)
[[ $line == *"mpirun -np 16 "* ]] || fail "--hosts 2: $line"
written=$(hostfile_of "$line")
[[ $(wc -l < "$written") == 2 ]] || fail "--hosts 2 wrote $(wc -l < "$written") hosts"
rm -f "$written"
# A value in the launching environment wins over the file's default.
line=$(NCCL_DEBUG=INFO launch --hostfile "$tmp/hosts" -- train)
[[ $line == *"-x NCCL_DEBUG=INFO "* ]] || fail "NCCL_DEBUG=INFO from the environment: $line"
rm -f "$(hostfile_of "$line")"
# Settings that must not come back: forced algorithms and protocols, fork-safety overrides.
for unwanted in NCCL_ALGO NCCL_PROTO RDMAV_FORK_SAFE FI_EFA_FORK_SAFE; do
  [[ $line != *"$unwanted="* ]] || fail "$unwanted is set: $line"
done

expect_error() {  # WANT ARGS...: exit 2 and WANT on stderr
  local want=$1 err rc; shift
  set +e
  err=$(launch "$@" 2>&1 >/dev/null); rc=$?
  set -e
  (( rc == 2 )) || fail "exit $rc (want 2) for: $*"
  [[ $err == *"$want"* ]] || fail "for '$*' expected '$want' in: $err"
}
expect_error "--hosts 4 but $tmp/hosts lists 3 host(s)" --hostfile "$tmp/hosts" --hosts 4 -- train
expect_error "--hosts must be a positive number, got '0'" --hostfile "$tmp/hosts" --hosts 0 -- train
expect_error "--hostfile FILE is required" --hostfile "$tmp/missing" -- train
printf '# nothing yet\n\n' > "$tmp/empty"
expect_error "$tmp/empty lists no hosts" --hostfile "$tmp/empty" -- train
expect_error "give the lansbert subcommand after --" --hostfile "$tmp/hosts"
expect_error "unknown option --np" --np 8
# --- Slurm ---------------------------------------------------------------------------------
mkdir -p "$tmp/bin" "$tmp/spool"
cat > "$tmp/bin/srun" <<'STUB'
#!/usr/bin/env bash
echo "srun $*"
env
STUB
chmod +x "$tmp/bin/srun"
cp "$src/scripts/launch/p3dn.sbatch" "$tmp/spool/slurm_script"  # sbatch runs a spooled copy
sbatch_run() { (cd "$tmp" && SLURM_SUBMIT_DIR=$src LANSBERT_BIN=/opt/lansbert PATH="$tmp/bin:$PATH" \
                 bash "$tmp/spool/slurm_script" "$@"); }
out=$(SLURM_CPUS_ON_NODE=96 sbatch_run train --config c.yaml)
for want in "srun --mpi=pmix --ntasks-per-node=8 --cpus-per-task=12 --distribution=block:block --cpu-bind=verbose,cores --kill-on-bad-exit=1 /opt/lansbert train --config c.yaml" \
            "FI_PROVIDER=efa" "FI_EFA_USE_DEVICE_RDMA=0" "NCCL_NET=AWS Libfabric" "NCCL_SOCKET_IFNAME=ens,eth" \
            "OMP_NUM_THREADS=6" "LANSBERT_COMM=mpi" "LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:"; do
  [[ $out == *"$want"* ]] || fail "sbatch: no '$want' in the srun line or environment ($(head -1 <<< "$out"))"
done
# With SMT off (48 CPUs a node) a rank gets 6.
out48=$(SLURM_CPUS_ON_NODE=48 sbatch_run train)
[[ $(head -1 <<< "$out48") == *"--cpus-per-task=6 "* ]] || fail "sbatch on 48 CPUs: not 6 per rank: $(head -1 <<< "$out48")"
# A node CPU count srun could not split into 8 equal ranks is refused before srun.
set +e
err=$(SLURM_CPUS_ON_NODE=90 sbatch_run train 2>&1 >/dev/null); rc=$?
set -e
(( rc == 2 )) && [[ $err == *"SLURM_CPUS_ON_NODE=90 is not a multiple of 8"* ]] || fail "90 CPUs: exit $rc: $err"
# Every setting the mpirun line passes (-x NAME=value) is in the Slurm ranks' environment
# (but LD_LIBRARY_PATH, which each launcher builds from its own).
line=$(launch --hostfile "$tmp/hosts" -- train)
settings=$(grep -oE -- '-x [A-Z_]+=([^ \\]|\\.)*' <<< "$line" | cut -c4- | sed 's/\\//g' | grep -v '^LD_LIBRARY_PATH=')
rm -f "$(hostfile_of "$line")"
n_env=$(wc -l <<< "$names")
(( $(wc -l <<< "$settings") == n_env )) || fail "not the $n_env settings of p3dn-env.sh in: $line"
while read -r setting; do
  grep -qxF -- "$setting" <<< "$out" || fail "the Slurm ranks lack $setting"
done <<< "$settings"
# Its #SBATCH header asks for what srun is told.
grep -q '^#SBATCH --ntasks-per-node=8$' "$src/scripts/launch/p3dn.sbatch" || fail "#SBATCH --ntasks-per-node"
grep -q '^#SBATCH --signal=TERM@300$' "$src/scripts/launch/p3dn.sbatch" || fail "#SBATCH --signal (checkpoint before the time limit)"
set +e
err=$(sbatch_run 2>&1 >/dev/null); rc=$?
set -e
(( rc == 2 )) && [[ $err == *"give the lansbert subcommand"* ]] || fail "sbatch without a subcommand: exit $rc: $err"
set +e
err=$(cd "$tmp" && LANSBERT_ROOT=$tmp PATH="$tmp/bin:$PATH" bash "$tmp/spool/slurm_script" train 2>&1 >/dev/null); rc=$?
set -e
(( rc == 2 )) && [[ $err == *"no scripts/launch/p3dn-env.sh under $tmp"* ]] || fail "sbatch outside the repository: exit $rc: $err"
echo "launch_p3dn: ok"
