#!/usr/bin/env bash
# scripts/launch/p3dn.sh without --run: the mpirun line it prints for a hostfile (8 ranks
# per host, slots added where a line has none, comments and blank lines skipped, the EFA and
# NCCL settings), --hosts taking the first N hosts, and clear refusals (no hostfile, more
# hosts than it lists, a bad count, no subcommand).
# Usage: launch_p3dn_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
launch() { bash "$src/scripts/launch/p3dn.sh" --binary /opt/lansbert "$@"; }
printf '# the cluster\n10.0.1.17\n\n10.0.1.18 slots=8\n10.0.1.19\n' > "$tmp/hosts"

line=$(launch --hostfile "$tmp/hosts" -- train --config c.yaml)
[[ $line == "mpirun -np 24 --hostfile "* ]] || fail "all three hosts, 24 ranks: $line"
for want in "FI_PROVIDER=efa" "FI_EFA_USE_DEVICE_RDMA=0" "NCCL_PROTO=simple" "LANSBERT_COMM=mpi" \
            "/opt/lansbert train --config c.yaml"; do
  [[ $line == *"$want"* ]] || fail "no '$want' in: $line"
done
# The hostfile it wrote: three hosts, each with 8 slots.
written=$(sed -E 's/.*--hostfile ([^ ]+) .*/\1/' <<< "$line")
[[ $(cat "$written") == $'10.0.1.17 slots=8\n10.0.1.18 slots=8\n10.0.1.19 slots=8' ]] ||
  fail "slotted hostfile: $(cat "$written")"
rm -f "$written"
line=$(launch --hostfile "$tmp/hosts" --hosts 2 -- bench-comm)
[[ $line == "mpirun -np 16 "* ]] || fail "--hosts 2: $line"
written=$(sed -E 's/.*--hostfile ([^ ]+) .*/\1/' <<< "$line")
[[ $(wc -l < "$written") == 2 ]] || fail "--hosts 2 wrote $(wc -l < "$written") hosts"
rm -f "$written"

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
echo "launch_p3dn: ok"
