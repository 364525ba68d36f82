# The environment every lansbert rank on p3dn.24xlarge gets, shared by the mpirun launcher
# (p3dn.sh passes each as `-x NAME=value`) and the Slurm one (p3dn.sbatch exports them for
# srun). Sourced, not run. One NAME=value per entry; the comment says why.
# shellcheck shell=bash
P3DN_RANKS_PER_HOST=8      # p3dn.24xlarge: 8 x V100 SXM2 32 GB, one rank per GPU
P3DN_CORES_PER_RANK=6      # 2 sockets x 24 cores: 6 physical cores per rank
P3DN_ENV=(
  FI_PROVIDER=efa          # libfabric: use the EFA provider, fail if it is absent
                           #   (rather than silently running NCCL over TCP)
  FI_EFA_USE_DEVICE_RDMA=0 # p3dn has NO GPUDirect RDMA over EFA (V100 + first-gen EFA;
                           #   device RDMA arrived with p4d/A100). 1 here fails or falls
                           #   back; on p4d/p5 set it to 1.
  FI_EFA_FORK_SAFE=1       # the data loader may fork; EFA memory registration must survive
                           #   it (needed with libfabric < 1.13 / old kernels)
  RDMAV_FORK_SAFE=1        # the same for rdma-core
  NCCL_PROTO=simple        # AWS recommends Simple for aws-ofi-nccl on EFA (p3dn/p4d);
                           #   LL/LL128 assume ordered, low-latency writes EFA lacks
  NCCL_SOCKET_IFNAME=ens,eth  # NCCL's bootstrap/OOB sockets on the VPC interface (ens5 on
                           #   recent AMIs, eth0 on older), not docker0/lo
  NCCL_ALGO=Ring           # the ring all-reduce the scaling model assumes; the tree helps
                           #   latency-bound small messages, not 340 MB of gradients
  NCCL_DEBUG=INFO          # prints "NET/OFI Selected Provider is efa": check it once per
  NCCL_DEBUG_SUBSYS=INIT,NET  #   cluster, then set NCCL_DEBUG=WARN
  OMP_NUM_THREADS=$P3DN_CORES_PER_RANK  # CPU threads per rank = its bound cores
  LANSBERT_COMM=mpi        # be explicit: a rank of an MPI job
)
