// Which kernels OpenBLAS picked for this CPU, and a warning when they waste it. Debian 12's
// OpenBLAS (0.3.21, DYNAMIC_ARCH) names the core at load time from the CPU model; a model
// newer than the library (an Intel Xeon of family 6, model 207, for one) falls back to its
// SSE3 "Prescott" kernels even where AVX2 and AVX-512 are there, and the CPU backend runs
// 2.3x (Haswell kernels) to 3.8x (SkylakeX) slower than it can: bert-base 128 x 8 on 2
// threads, 111 against 251 and 425 tokens/s (docs/performance.md). The choice is made before
// main, so lansbert can only say so, and how to choose: OPENBLAS_CORETYPE.
#pragma once

#include <string>

namespace lansbert {

// The warning for a core named `corename` on a CPU with (or without) AVX2 and FMA, when
// OPENBLAS_CORETYPE is `coretype_env` (null: unset); empty when there is nothing to say: the
// core has AVX2 kernels, the CPU has none, or the user chose the core.
std::string blas_kernel_warning_for(const std::string& corename, bool cpu_has_avx2_fma, const char* coretype_env);

// The same for this process: OpenBLAS's core, this CPU, this environment.
std::string blas_kernel_warning();

}  // namespace lansbert
