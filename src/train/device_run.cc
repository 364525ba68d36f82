#include "device_run.h"

#include <cstdio>

namespace lansbert {

Status open_device(const TrainConfig& cfg, const Communicator& comm, const TrainOptions& opts,
                   std::unique_ptr<DeviceBackend>* out) {
  if (comm.world() > 1)
    return Status::unsupported("backend: " + cfg.backend +
                               " trains on one rank only so far (the gradient all-reduce works on host buffers); got " +
                               std::to_string(comm.world()) + " ranks");
  LB_RETURN_IF_ERROR(make_device_backend(cfg.backend, out));
  if (opts.log && comm.rank() == 0)
    std::fprintf(opts.log, "backend %s: %s, %s GEMMs\n", cfg.backend.c_str(), (*out)->description().c_str(),
                 gemm_math_name(cfg.gemm_math()));
  return Status::ok();
}

Status make_device_updater(DeviceBackend& device, const UpdaterConfig& config,
                           std::unique_ptr<Updater>* out) {
  std::unique_ptr<Optimizer> opt;
  LB_RETURN_IF_ERROR(device.make_optimizer(config.optimizer.name, config.optimizer, &opt));
  UpdaterDeviceHooks hooks;
  DeviceBackend* d = &device;
  hooks.unscale_and_check = [d](const ParamTable& table, float* grads, double scale) {
    return d->unscale_and_check(table, grads, scale);
  };
  hooks.zero = [d](float* p, size_t n) { d->allocator().set_zero(p, n * sizeof(float)); };
  return Updater::create(config, std::move(opt), std::move(hooks), out);
}

HostCopies::HostCopies(DeviceBackend* device, const float* dp, const float* dm, const float* dv, size_t n)
    : params(dp), m(dm), v(dv) {
  if (!device) return;
  Allocator& a = device->allocator();
  p_.resize(n);
  m_.resize(n);
  v_.resize(n);
  a.copy_to_host(p_.data(), dp, n * sizeof(float));
  a.copy_to_host(m_.data(), dm, n * sizeof(float));
  a.copy_to_host(v_.data(), dv, n * sizeof(float));
  params = p_.data();
  m = m_.data();
  v = v_.data();
}

}  // namespace lansbert
