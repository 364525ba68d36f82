// `lansbert info`: what this build and this machine offer (version, build options, BLAS,
// CUDA devices, MPI/NCCL availability, threads), so a user can check a node before a job.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "commands.h"
#include "lansbert/backend/blas_kernels.h"
#include "lansbert/dist/fabric_probe.h"
#include "lansbert/dist/mpi_session.h"
#ifdef LANSBERT_HAVE_CUDA
#include "cuda_api.h"
#endif

extern "C" char* openblas_get_config(void);
extern "C" int openblas_get_num_threads(void);

namespace lansbert::cli {

namespace {
int run_info() {
  std::printf("lansbert %s (%s build)\n", LANSBERT_VERSION, LANSBERT_BUILD_TYPE);
  // __VERSION__ is GCC's bare "12.2.0" but Clang's "Debian Clang 14.0.6": name GCC's.
#if defined(__clang__)
  std::printf("  compiler      : %s\n", __VERSION__);
#else
  std::printf("  compiler      : GCC %s\n", __VERSION__);
#endif
  std::printf("  BLAS          : %s (%d threads)\n", openblas_get_config(),
              openblas_get_num_threads());
  if (const std::string w = blas_kernel_warning(); !w.empty()) std::printf("  BLAS warning  : %s\n", w.c_str());
  std::printf("  OpenMP threads: %d (hardware threads %u)\n", omp_get_max_threads(),
              std::thread::hardware_concurrency());
#ifdef LANSBERT_HAVE_CUDA
  const int n = cuda::device_count();
  std::printf("  CUDA backend  : built for CUDA architectures %s (%s), %d device(s) visible\n",
              cuda::built_architectures(), cuda::runtime_and_driver_versions().c_str(), n);
  for (int i = 0; i < n; ++i) {
    const Status runs = cuda::check_kernel_image(i);
    std::printf("    [%d] %s%s\n", i, cuda::device_description(i).c_str(),
                runs.is_ok() ? "" : (": " + runs.message()).c_str());
  }
  std::printf("  cuDNN         : %s; fused attention with precision.attention cudnn|auto\n",
              cuda::cudnn_library_status().c_str());
  // Whether device 0 takes it (a handle on the device, cuDNN loaded): what `auto` would find.
  if (n > 0 && cuda::check_kernel_image(0).is_ok())
    std::printf("  fused attention on [0]: %s\n", cuda::fused_attention_availability().c_str());
#else
  std::printf("  CUDA backend  : not built (configure with -DLANSBERT_CUDA=ON)\n");
#endif
  std::printf("  MPI launcher  : %s\n", launched_by_mpi_launcher()
                                           ? "yes (this process is a rank of an MPI job)"
                                           : "no (a plain run uses the single-process communicator)");
  const FabricInfo f = probe_fabric();
  std::string providers;
  for (const std::string& p : f.providers) providers += (providers.empty() ? "" : ", ") + p;
  std::printf("  libfabric     : %s; providers: %s\n", f.libfabric_version.c_str(),
              f.error.empty() ? providers.c_str() : ("none (" + f.error + ")").c_str());
  std::printf("  EFA           : %s\n", f.efa ? "present (provider efa)"
                                             : "absent (no efa provider on this node)");
  if (f.nccl_net_plugin.empty()) {
    // NCCL_NET (the launchers set it) makes NCCL refuse to start without that network.
    const char* net = std::getenv("NCCL_NET");
    std::printf("  NCCL net      : %s does not load (%s); %s\n", f.nccl_net_plugin_name.c_str(),
                f.nccl_net_plugin_error.c_str(),
                net && *net ? ("NCCL would stop at start-up (NCCL_NET=" + std::string(net) + ")").c_str()
                            : "NCCL would use its built-in IB/socket transport");
  } else {
    std::printf("  NCCL net      : %s would load (aws-ofi-nccl: NCCL over libfabric)\n",
                f.nccl_net_plugin.c_str());
  }
  return 0;
}
}  // namespace

void add_info_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("info", "Print version, build options and devices");
  sub->callback([] { set_exit_code(run_info()); });
}

}  // namespace lansbert::cli
