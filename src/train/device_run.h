// The trainer's device plumbing (backend: cuda), kept out of trainer.cc: opening the
// registered DeviceBackend with the run's checks and binding each rank to its device (the
// communicator over device buffers is device_ranks.h's), the Updater over device buffers,
// and the host staging of device buffers for checkpoint writes.
#pragma once

#include <memory>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/optim/updater.h"
#include "lansbert/train/device_backend.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_ranks.h"
#include "lansbert/train/train_config.h"
#include "lansbert/train/trainer.h"

namespace lansbert {

// Looks cfg.backend up in the registry, refuses what the device trainer does not do yet
// (see device_multi_rank_check) and binds this rank to its device
// (device_for_rank). Collective over `comm`: when any rank fails, every rank fails (a
// rank's own error, or one saying another rank failed), so no rank waits in a collective
// for one that gave up. Logs the device on rank 0.
Status open_device(const TrainConfig& cfg, Communicator& comm, const TrainOptions& opts,
                   std::unique_ptr<DeviceBackend>* out);

// What a device run on `world` > 1 ranks refuses (the same on every rank): fixed-order
// reductions (NCCL has no such mode).
Status device_multi_rank_check(const TrainConfig& cfg, int world);



// An Updater whose optimizer, unscale-and-check and moment zeroing run on the device.
Status make_device_updater(DeviceBackend& device, const UpdaterConfig& config,
                           std::unique_ptr<Updater>* out);

// Loads the weights in `dir` into `params` (table layout; a device buffer when there is a
// device) on every rank of `comm`: rank 0 reads model.safetensors, checked against *meta (a
// lansbert checkpoint), or unchecked when meta is null (a Hugging Face directory); the other
// ranks receive its values over comm. So a job reads the weights once whatever its rank
// count: the shared file system of a 192-node job serves one copy, not one a node. Collective;
// when rank 0's read fails every rank fails with its code.
Status load_params_on_ranks(Communicator& comm, DeviceBackend* device, const std::string& dir,
                            const CheckpointMeta* meta, const ParamTable& table, float* params);

// Host pointers to params (n_params floats), m and v (n_state floats each): the buffers
// themselves without a device, else host copies made at construction (device -> host,
// synchronous).
class HostCopies {
 public:
  HostCopies(DeviceBackend* device, const float* params, size_t n_params, const float* m,
             const float* v, size_t n_state);
  const float* params = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;

  // The three as vectors of their own, for a writer that runs while the next steps change the
  // buffers (checkpoint.async): the device's host copies moved out, or the host buffers
  // copied. The pointers above are null afterwards.
  struct Owned {
    std::vector<float> params, m, v;
  };
  Owned take();

 private:
  size_t n_params_, n_state_;
  std::vector<float> p_, m_, v_;
};

}  // namespace lansbert
