// blas_kernels.h: OpenBLAS's core choice against the CPU's instruction sets.
#include "lansbert/backend/blas_kernels.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

extern "C" char* openblas_get_corename(void);

namespace lansbert {

std::string blas_kernel_warning_for(const std::string& corename, bool cpu_has_avx2_fma, const char* coretype_env) {
  if (!cpu_has_avx2_fma || coretype_env != nullptr) return "";
  std::string core = corename;
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char c) { return std::tolower(c); });
  // OpenBLAS 0.3.x's x86-64 cores with AVX2 (or wider) GEMM kernels.
  constexpr std::array<const char*, 5> kAvx2Cores = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"};
  for (const char* c : kAvx2Cores)
    if (core == c) return "";
  return "OpenBLAS chose its '" + corename +
         "' kernels, which use no AVX2, on a CPU that has AVX2 and FMA (this OpenBLAS does not know the CPU "
         "model): the CPU backend runs 2 to 4 times slower than it can. Set OPENBLAS_CORETYPE=SkylakeX (a CPU "
         "with AVX-512) or Haswell (AVX2) in the environment of the run";
}

std::string blas_kernel_warning() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool avx2_fma = false;
#endif
  const char* name = openblas_get_corename();
  return blas_kernel_warning_for(name ? name : "unknown", avx2_fma, std::getenv("OPENBLAS_CORETYPE"));
}

}  // namespace lansbert
