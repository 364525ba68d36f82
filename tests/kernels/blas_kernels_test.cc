// blas_kernels.h: the warning appears exactly when OpenBLAS picked kernels without AVX2 on a
// CPU with AVX2 and FMA and the user did not choose the core; and for this process, the
// warning agrees with the core OpenBLAS reports.
#include "lansbert/backend/blas_kernels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

extern "C" char* openblas_get_corename(void);

namespace lansbert {
namespace {

TEST(BlasKernels, WarnsOfKernelsWithoutAvx2OnACpuWithAvx2) {
  const std::string w = blas_kernel_warning_for("Prescott", true, nullptr);
  EXPECT_NE(w.find("'Prescott' kernels"), std::string::npos) << w;
  EXPECT_NE(w.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << w;
  EXPECT_FALSE(blas_kernel_warning_for("Sandybridge", true, nullptr).empty());  // AVX, no AVX2
  EXPECT_FALSE(blas_kernel_warning_for("Nehalem", true, nullptr).empty());
}

TEST(BlasKernels, SaysNothingWhenTheKernelsFitOrTheUserChose) {
  for (const char* core : {"Haswell", "Zen", "SkylakeX", "COOPERLAKE", "SapphireRapids"})
    EXPECT_EQ(blas_kernel_warning_for(core, true, nullptr), "") << core;
  EXPECT_EQ(blas_kernel_warning_for("Prescott", false, nullptr), "");  // a CPU without AVX2
  EXPECT_EQ(blas_kernel_warning_for("Prescott", true, "Prescott"), "");  // chosen by the user
}

// Only where this process warns (OpenBLAS picked kernels without AVX2 and OPENBLAS_CORETYPE is
// unset): the tests run under OPENBLAS_CORETYPE, so there this checks nothing, and the rule is
// the one the two tests above check through blas_kernel_warning_for.
TEST(BlasKernels, ThisProcessWarnsOnlyAboutTheCoreOpenBlasReports) {
  const std::string w = blas_kernel_warning();
  const char* core = openblas_get_corename();
  ASSERT_NE(core, nullptr);
  if (!w.empty()) {
    EXPECT_NE(w.find(std::string("'") + core + "'"), std::string::npos) << w;
    EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr) << "a chosen core was warned about";
  }
}

}  // namespace
}  // namespace lansbert
