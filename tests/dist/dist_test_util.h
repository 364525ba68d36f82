// Shared by the MPI test programs: a failure counter whose verdict is reduced over ranks (as
// nccl-tests do), so every rank exits with the same code and rank 0 prints the summary.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include "lansbert/dist/communicator.h"

namespace lansbert::testing {

class Verdict {
 public:
  explicit Verdict(Communicator& comm) : comm_(comm) {}
  // Records a failure (printed with the rank) when !ok.
  bool expect(bool ok, const std::string& what) {
    if (!ok) {
      ++failures_;
      if (failures_ <= 20) std::fprintf(stderr, "[rank %d] FAIL %s\n", comm_.rank(), what.c_str());
    }
    return ok;
  }
  // Exit code for main: 0 iff no rank failed.
  int finish(const char* name) {
    double f = failures_;
    comm_.all_reduce(&f, 1, ReduceOp::kSum);
    if (comm_.rank() == 0) {
      std::printf("%s: %s on %d rank(s) (%g failure(s))\n", name, f == 0 ? "PASS" : "FAIL",
                  comm_.world(), f);
    }
    return f == 0 ? 0 : 1;
  }

 private:
  Communicator& comm_;
  long failures_ = 0;
};

inline double rel_diff(double a, double b) {
  const double d = std::fabs(a - b), s = std::max(std::fabs(a), std::fabs(b));
  return s == 0 ? 0 : d / s;
}

}  // namespace lansbert::testing
