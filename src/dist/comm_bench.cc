// bench_all_reduce: the timing loop behind `lansbert bench-comm`.
#include "lansbert/dist/comm_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "mpi_check.h"

namespace lansbert {

std::vector<CommBenchRow> bench_all_reduce(Communicator& comm, const std::vector<size_t>& sizes,
                                           int iters, int warmup, bool plain_mpi) {
  LB_CHECK_MSG(!plain_mpi || std::strcmp(comm.kind(), "mpi") == 0 || comm.world() == 1,
               "the plain MPI baseline needs an MPI communicator");
  const int W = comm.world();
  std::vector<CommBenchRow> rows;
  std::vector<float> buf;
  for (size_t bytes : sizes) {
    const size_t n = std::max<size_t>(bytes / sizeof(float), 1);
    buf.assign(n, 0.f);
    auto run = [&] {
      if (plain_mpi && W > 1) {
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD));
      } else {
        comm.all_reduce(buf.data(), n, ReduceOp::kSum);
      }
    };
    CommBenchRow row;
    row.bytes = n * sizeof(float);
    for (size_t i = 0; i < n; ++i) buf[i] = float((comm.rank() + 1) * int(i % 3));
    run();
    for (size_t i = 0; i < n; ++i)
      if (buf[i] != float(W * (W + 1) / 2 * int(i % 3))) row.correct = false;
    std::fill(buf.begin(), buf.end(), 0.f);  // zeros stay zeros: no overflow over iterations
    for (int i = 0; i < warmup; ++i) run();
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) run();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    comm.all_reduce(&s, 1, ReduceOp::kMax);
    row.time_us = s * 1e6;
    row.algbw_gbs = row.bytes / s / 1e9;
    row.busbw_gbs = W > 1 ? row.algbw_gbs * 2.0 * (W - 1) / W : 0.0;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace lansbert
