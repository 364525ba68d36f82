// Shared by the MPI test programs: a failure counter whose verdict is reduced over ranks (as
// nccl-tests do), so every rank exits with the same code and rank 0 prints the summary.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "lansbert/dist/communicator.h"
#include "lansbert/dist/mpi_session.h"

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

// Runs body(comm, verdict, tag) on an MPI communicator of each reduction order (tag "native"
// or "fixed"), each with its own Verdict, finished as "NAME (native)" / "NAME (fixed order)".
// Returns 0 iff every run passed on every rank.
template <typename F>
int for_each_reduction_order(const std::string& name, F&& body) {
  std::shared_ptr<MpiSession> session = MpiSession::acquire();  // one MPI for both communicators
  int rc = 0;
  for (ReductionOrder order : {ReductionOrder::kNative, ReductionOrder::kFixedOrder}) {
    CommOptions opt;
    opt.order = order;
    std::unique_ptr<Communicator> c = make_mpi_communicator(opt);
    Verdict v(*c);
    const bool native = order == ReductionOrder::kNative;
    body(*c, v, native ? "native" : "fixed");
    rc |= v.finish((name + (native ? " (native)" : " (fixed order)")).c_str());
  }
  return rc;
}

// Element counts the collective tests try: 0..67 (around small rank multiples) and a few
// larger ones not divisible by 2, 3 or 4.
inline std::vector<size_t> collective_test_sizes() {
  std::vector<size_t> sizes;
  for (size_t n = 0; n < 68; ++n) sizes.push_back(n);
  for (size_t n : {1000, 4099, 65537}) sizes.push_back(n);
  return sizes;
}

inline double rel_diff(double a, double b) {
  const double d = std::fabs(a - b), s = std::max(std::fabs(a), std::fabs(b));
  return s == 0 ? 0 : d / s;
}

}  // namespace lansbert::testing
