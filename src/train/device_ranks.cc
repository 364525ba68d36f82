// Opening devices across ranks (device_ranks.h): one device per local rank, and every
// rank agreeing on failure so none is left waiting in a collective (also used by the
// sharded checkpoint writer).
#include "lansbert/train/device_ranks.h"

namespace lansbert {

Status agree_across_ranks(Communicator& comm, const Status& st, const std::string& what,
                          Status (*other_rank)(std::string)) {
  if (comm.world() == 1) return st;
  double failed = st.is_ok() ? 0 : double(static_cast<int>(st.code()));
  comm.all_reduce(&failed, 1, ReduceOp::kMax);
  if (!st.is_ok()) return st;
  if (failed != 0) {
    std::string message = what + " failed on another rank (its error is in that rank's output)";
    if (other_rank) return other_rank(std::move(message));
    return Status::with_code(static_cast<StatusCode>(static_cast<int>(failed)), std::move(message));
  }
  return Status::ok();
}

namespace {
Status bind_device(DeviceBackend& device, const Communicator& comm) {
  int index = 0;
  LB_RETURN_IF_ERROR(device_for_rank(comm.local_rank(), comm.local_world(), device.visible_devices(), &index));
  return device.use_device(index);
}
}  // namespace

Status device_for_rank(int local_rank, int local_world, int visible, int* index) {
  if (visible <= 0) return Status::unsupported("backend: cuda: no device visible to this rank");
  // One visible device among several ranks of a host: the scheduler gave each rank its own
  // GPU (srun --gpus-per-task=1, or CUDA_VISIBLE_DEVICES set per rank). If it did not, the
  // ranks share device 0 and NCCL refuses that by name at its initialisation.
  if (visible == 1) {
    *index = 0;
    return Status::ok();
  }
  if (local_world > visible)
    return Status::invalid_argument("backend: cuda: " + std::to_string(local_world) + " ranks on this host but only " +
                                    std::to_string(visible) + " visible devices; start one rank per GPU "
                                    "(mpirun -npernode <GPUs per node>) and leave every GPU visible to every rank, or give each "
                                    "rank exactly one (srun --gpus-per-task=1)");
  *index = local_rank;
  return Status::ok();
}

Status open_device_backend(const std::string& name, Communicator& comm, std::unique_ptr<DeviceBackend>* out) {
  Status st = make_device_backend(name, out);
  if (st.is_ok()) st = bind_device(**out, comm);
  return agree_across_ranks(comm, st, "backend " + name + ": opening the device");
}

Status open_device_communicator(DeviceBackend* device, Communicator& host, Ops<float>& ops,
                                std::unique_ptr<Communicator>* out) {
  out->reset();
  if (!device || host.world() == 1) return Status::ok();
  Status st = device->make_communicator(host, ops, out);
  LB_RETURN_IF_ERROR(agree_across_ranks(host, st, "creating the device communicator"));
  if (!*out || (*out)->world() != host.world() || (*out)->rank() != host.rank())
    return Status::internal("the device communicator's rank/world differs from the host communicator's");
  return Status::ok();
}

}  // namespace lansbert
