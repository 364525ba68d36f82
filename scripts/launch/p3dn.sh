#!/usr/bin/env bash
# Builds (and with --run, executes) the mpirun line for lansbert on N p3dn.24xlarge hosts:
# 8 V100-32GB per host, one rank per GPU, NCCL over EFA through the aws-ofi-nccl plugin.
#
#   scripts/launch/p3dn.sh --hostfile hosts --hosts 192 -- train --config configs/bert-large-phase1-96k.yaml
#   scripts/launch/p3dn.sh --hostfile hosts --hosts 2 --run -- bench-comm --max-bytes 256M
#
# The hostfile lists one private IP per line ("10.0.1.17 slots=8" is written for you if the
# lines carry no slots). docs/cluster.md explains how to get from a fresh AWS account here.
set -euo pipefail

hostfile="" hosts="" run=0 binary="${LANSBERT_BIN:-$(command -v lansbert || echo ./build/lansbert)}"
while (( $# )); do
  case $1 in
    --hostfile) hostfile=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --run) run=1; shift ;;
    --) shift; break ;;
    *) echo "p3dn.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n $hostfile && -f $hostfile ]] || { echo "p3dn.sh: --hostfile FILE is required" >&2; exit 2; }
(( $# )) || { echo "p3dn.sh: give the lansbert subcommand after --" >&2; exit 2; }
listed=$(grep -cv '^\s*\(#\|$\)' "$hostfile" || true)
(( listed > 0 )) || { echo "p3dn.sh: $hostfile lists no hosts" >&2; exit 2; }
[[ -n $hosts ]] || hosts=$listed
[[ $hosts =~ ^[1-9][0-9]*$ ]] || { echo "p3dn.sh: --hosts must be a positive number, got '$hosts'" >&2; exit 2; }
# More hosts than the file lists would only fail later inside mpirun ("not enough slots").
(( hosts <= listed )) ||
  { echo "p3dn.sh: --hosts $hosts but $hostfile lists $listed host(s)" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/p3dn-env.sh"             # P3DN_ENV: the EFA, NCCL and thread settings, explained there
ranks_per_host=$P3DN_RANKS_PER_HOST
np=$(( hosts * ranks_per_host ))

# Open MPI reads slots from the hostfile; add slots=8 where a line has none.
slotted=$(mktemp /tmp/lansbert-hosts.XXXXXX)
awk -v s=$ranks_per_host '/^[[:space:]]*(#|$)/ {next} /slots=/ {print; next} {print $1 " slots=" s}' \
  "$hostfile" | head -n "$hosts" > "$slotted"

# mpirun by its absolute path: Open MPI then starts its daemons on the other hosts from the same
# installation (as --prefix would), not from whatever a non-interactive ssh PATH finds there.
mpirun_bin=$(command -v mpirun || echo mpirun)
cmd=(
  "$mpirun_bin" -np "$np" --hostfile "$slotted"
  --map-by "ppr:4:socket:PE=$P3DN_CORES_PER_RANK"  # 4 ranks per socket: GPUs 0-3 on socket 0,
                                       # 4-7 on socket 1, 6 physical cores each
  --bind-to core                       # keep each rank's OpenMP/loader threads on its cores
  --mca pml ob1 --mca btl tcp,self     # MPI bootstraps NCCL, reduces a few scalars per step and
  --mca btl_tcp_if_exclude lo,docker0  #   sends a resumed run's weights and moments from rank 0
                                       #   (GBs, once per start): plain TCP (as AWS's NCCL-over-EFA
                                       #   examples), never over docker/loopback, leaving EFA to NCCL
  -x PATH                              # the same toolkit on every host, and the plugin's and
  -x "LD_LIBRARY_PATH=$P3DN_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # libfabric's first
)
for setting in "${P3DN_ENV[@]}"; do cmd+=(-x "$setting"); done
cmd+=("$binary" "$@")
printf '%q ' "${cmd[@]}"; echo
# On stderr, so that stdout stays the one command line (for $(...) and job scripts).
echo "p3dn.sh: the command reads $slotted (the hostfile with slots=$ranks_per_host); remove it after the job" >&2
if (( run )); then exec "${cmd[@]}"; fi
