# The environment every lansbert rank on p3dn.24xlarge gets, shared by the mpirun launcher
# (p3dn.sh passes each as `-x NAME=value`) and the Slurm one (p3dn.sbatch exports them for
# srun). Sourced, not run. One NAME=value per entry; the comment says why. A value already in
# the launching shell's environment wins (NCCL_DEBUG=INFO scripts/launch/p3dn.sh ...).
# Sources: aws-ofi-nccl's doc/efa-env-var.md and its platform-aws code (the plugin sets the
# EFA fork-safety and protocol settings itself), NCCL's environment-variable documentation.
# shellcheck shell=bash
P3DN_RANKS_PER_HOST=8      # p3dn.24xlarge: 8 x V100 SXM2 32 GB, one rank per GPU
P3DN_CORES_PER_RANK=6      # 2 sockets x 24 cores: 6 physical cores per rank
# Where the EFA installer puts aws-ofi-nccl (lib/x86_64-linux-gnu on Ubuntu up to plugin 1.16)
# and its libfabric: NCCL dlopens the plugin by file name, so its directory must be on the
# ranks' loader path (both launchers prepend these; directories a node lacks cost nothing).
P3DN_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu:/opt/amazon/ofi-nccl/lib64
P3DN_LIBRARY_PATH+=:/opt/amazon/efa/lib:/opt/amazon/efa/lib64
P3DN_ENV=(
  "NCCL_NET=${NCCL_NET:-AWS Libfabric}"  # NCCL must use the aws-ofi-nccl plugin: without it (not
                           #   found, or not loadable) NCCL stops with an error instead of
                           #   silently running over its own TCP sockets at a tenth of the speed
  "FI_PROVIDER=${FI_PROVIDER:-efa}"  # libfabric offers the plugin only its EFA provider, never
                           #   its TCP/sockets ones (current plugins pick efa themselves)
  "FI_EFA_USE_DEVICE_RDMA=${FI_EFA_USE_DEVICE_RDMA:-0}"  # p3dn has no GPUDirect RDMA over EFA
                           #   (V100 + first-gen EFA): GPU buffers are staged through host
                           #   memory. Newer plugins and libfabric decide this themselves.
  "NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-ens,eth}"  # NCCL's bootstrap sockets on the VPC
                           #   interface (ens5 on recent AMIs, eth0 on older)
  "NCCL_DEBUG=${NCCL_DEBUG:-WARN}"  # NCCL's production level; NCCL_DEBUG=INFO once per cluster
                           #   shows the network in use ("via NET/AWS Libfabric" or
                           #   "NET/Libfabric" on the channel lines, never "NET/Socket")
  "OMP_NUM_THREADS=${OMP_NUM_THREADS:-$P3DN_CORES_PER_RANK}"  # CPU threads per rank = its cores
  "LANSBERT_COMM=${LANSBERT_COMM:-mpi}"  # be explicit: a rank of an MPI job
)
# Not set, on purpose: NCCL_ALGO and NCCL_PROTO (NCCL's documentation lists them for debugging,
# not production; NCCL's tuner picks tree or ring per size and rank count, and at 1,536 ranks a
# forced ring pays ~2 x 1,535 hops of latency on every gradient bucket; the plugin restricts the
# protocol where EFA needs it), FI_EFA_FORK_SAFE (the plugin sets it) and RDMAV_FORK_SAFE
# (aws-ofi-nccl's documentation: do not use it on current kernels).
