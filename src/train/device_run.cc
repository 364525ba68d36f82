#include "device_run.h"

#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_capability.h"

#include <cstdio>

namespace lansbert {

Status device_multi_rank_check(const TrainConfig& cfg, int world) {
  if (world <= 1) return Status::ok();
  if (cfg.distributed.reduction_order != "fast")
    return Status::unsupported("distributed.reduction_order: " + cfg.distributed.reduction_order +
                               " works on host buffers (MPI) only; with backend: " + cfg.backend +
                               " the gradients are reduced by NCCL in its own order: use fast");
  return Status::ok();
}


Status open_device(const TrainConfig& cfg, Communicator& comm, const TrainOptions& opts,
                   std::unique_ptr<DeviceBackend>* out) {
  LB_RETURN_IF_ERROR(device_multi_rank_check(cfg, comm.world()));
  LB_RETURN_IF_ERROR(open_device_backend(cfg.backend, comm, out));
  if (opts.log && comm.rank() == 0)
    std::fprintf(opts.log, "backend %s: %s, %s GEMMs%s\n", cfg.backend.c_str(), (*out)->description().c_str(),
                 gemm_math_name(cfg.gemm_math()),
                 comm.world() > 1 ? (", one device per rank, " + std::to_string(comm.world()) + " ranks").c_str() : "");
  // A run that cannot fit stops here with the plan's numbers and what to change, rather than
  // at an allocation deep in the model (a fatal CUDA error) after the data is open.
  // Every rank takes part in the agreement, also one that cannot tell its free memory.
  // The GEMM precision first: bf16 on a V100 would fail (or crawl) inside cuBLAS.
  std::string note;
  Status st = check_config_precision_on_device(cfg, (*out)->compute_capability(), (*out)->description(), &note);
  if (!note.empty() && opts.log && comm.rank() == 0) std::fprintf(opts.log, "%s\n", note.c_str());
  size_t free_b = 0, total_b = 0;
  const bool known = (*out)->memory_info(&free_b, &total_b);
  TrainPlan plan;
  if (st.is_ok()) st = make_plan(cfg, comm.world(), &plan);
  if (st.is_ok() && known)
    st = check_plan_fits(cfg, plan, double(free_b), 1, "free memory on " + (*out)->description());
  // Every rank's share is the same plan and precision: another rank's refusal is this rank's config error too
  // (exit 2 whichever rank aborts the job first).
  LB_RETURN_IF_ERROR(agree_across_ranks(comm, st, "backend " + cfg.backend + ": checking the device",
                                        &Status::invalid_argument));
  if (known && opts.log && comm.rank() == 0)
    std::fprintf(opts.log, "device memory: the plan needs %.2f GiB of the %.2f GiB free (%.2f GiB total)\n",
                 double(plan.bytes_per_rank()) / 1073741824.0,
                 double(free_b) / 1073741824.0, double(total_b) / 1073741824.0);
  return Status::ok();
}


Status make_device_updater(DeviceBackend& device, const UpdaterConfig& config,
                           std::unique_ptr<Updater>* out) {
  std::unique_ptr<Optimizer> opt;
  LB_RETURN_IF_ERROR(device.make_optimizer(config.optimizer.name, config.optimizer, &opt));
  UpdaterDeviceHooks hooks;
  DeviceBackend* d = &device;
  hooks.unscale_and_check = [d](const ParamTable& table, float* grads, double scale, size_t begin, size_t end) {
    return d->unscale_and_check(table, grads, scale, begin, end);
  };
  hooks.zero = [d](float* p, size_t n) { d->allocator().set_zero(p, n * sizeof(float)); };
  return Updater::create(config, std::move(opt), std::move(hooks), out);
}

Status load_params_on_ranks(Communicator& comm, DeviceBackend* device, const std::string& dir,
                            const CheckpointMeta* meta, const ParamTable& table, float* params) {
  std::vector<float> staged(device ? table.total_elements() : 0, 0.0f);
  float* host = device ? staged.data() : params;
  Status st;
  if (comm.rank() == 0)
    st = meta ? load_checkpoint_params(dir, *meta, table, host) : load_hf_params(dir, table, host);
  LB_RETURN_IF_ERROR(agree_across_ranks(comm, st, "loading the weights on rank 0", nullptr));
  // Every element, padding included, so the replicas start bit-identical.
  if (comm.world() > 1) comm.broadcast(host, table.total_elements() * sizeof(float), 0);
  if (device) device->allocator().copy_from_host(params, host, staged.size() * sizeof(float));
  return Status::ok();
}

HostCopies::HostCopies(DeviceBackend* device, const float* dp, size_t n_params, const float* dm,
                       const float* dv, size_t n_state)
    : params(dp), m(dm), v(dv), n_params_(n_params), n_state_(n_state) {
  if (!device) return;
  Allocator& a = device->allocator();
  p_.resize(n_params);
  m_.resize(n_state);
  v_.resize(n_state);
  a.copy_to_host(p_.data(), dp, n_params * sizeof(float));
  a.copy_to_host(m_.data(), dm, n_state * sizeof(float));
  a.copy_to_host(v_.data(), dv, n_state * sizeof(float));
  params = p_.data();
  m = m_.data();
  v = v_.data();
}

HostCopies::Owned HostCopies::take() {
  if (p_.empty() && n_params_ > 0) {  // the host buffers themselves: copied
    p_.assign(params, params + n_params_);
    m_.assign(m, m + n_state_);
    v_.assign(v, v + n_state_);
  }
  params = m = v = nullptr;
  return {std::move(p_), std::move(m_), std::move(v_)};
}

}  // namespace lansbert
