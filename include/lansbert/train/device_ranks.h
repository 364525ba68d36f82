// Devices under mpirun: each rank binds the device of its local rank, and every step that
// can fail on one rank is agreed on by all, so no rank waits in a collective for one that
// gave up. Used by the trainer (backend: cuda) and `lansbert bench-comm --backend cuda`.
#pragma once

#include <memory>
#include <string>

#include "lansbert/core/status.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/train/device_backend.h"

namespace lansbert {

// Every rank learns whether any rank failed: returns this rank's error, or, when only
// another rank failed, `other_rank` of a message naming `what` (unsupported by default; the
// checkpoint writer reports I/O errors); with other_rank null, a status of the failing rank's
// own code (the highest, when several fail), so every rank exits as it does. Collective
// over `comm`.
Status agree_across_ranks(Communicator& comm, const Status& st, const std::string& what,
                          Status (*other_rank)(std::string) = &Status::unsupported);

// The device a rank uses: its local rank, one rank per GPU, every GPU of a host visible to
// every rank (mpirun's default); or device 0 when a rank sees exactly one (a scheduler's
// per-rank binding). Fails, naming the counts, when a host runs more ranks than the (several)
// devices each rank sees.
Status device_for_rank(int local_rank, int local_world, int visible, int* index);

// Makes the registered backend `name` and binds this rank's device. Collective over `comm`.
Status open_device_backend(const std::string& name, Communicator& comm, std::unique_ptr<DeviceBackend>* out);

// The communicator over device buffers for gradient reduction: null on one rank or without
// a device (the host communicator then carries everything); else the backend's (NCCL),
// ordered after `ops`. Collective over `host`.
Status open_device_communicator(DeviceBackend* device, Communicator& host, Ops<float>& ops,
                                std::unique_ptr<Communicator>* out);

}  // namespace lansbert
