// The trainer's device plumbing (backend: cuda), kept out of trainer.cc: opening the
// registered DeviceBackend with the run's checks, the Updater over device buffers, and the
// host staging of device buffers for checkpoint writes.
#pragma once

#include <memory>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/optim/updater.h"
#include "lansbert/train/device_backend.h"
#include "lansbert/train/train_config.h"
#include "lansbert/train/trainer.h"

namespace lansbert {

// Looks cfg.backend up in the registry and refuses what the device trainer does not do yet
// (more than one rank, bf16/fp16). Logs the device on rank 0.
Status open_device(const TrainConfig& cfg, const Communicator& comm, const TrainOptions& opts,
                   std::unique_ptr<DeviceBackend>* out);

// An Updater whose optimizer, unscale-and-check and moment zeroing run on the device.
Status make_device_updater(DeviceBackend& device, const UpdaterConfig& config,
                           std::unique_ptr<Updater>* out);

// Host pointers to params, m and v: the buffers themselves without a device, else host
// copies made at construction (device -> host, synchronous).
class HostCopies {
 public:
  HostCopies(DeviceBackend* device, const float* params, const float* m, const float* v, size_t n);
  const float* params = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;

 private:
  std::vector<float> p_, m_, v_;
};

}  // namespace lansbert
