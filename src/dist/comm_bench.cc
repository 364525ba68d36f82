// bench_all_reduce: the timing loop behind `lansbert bench-comm`.
#include "lansbert/dist/comm_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "lansbert/core/buffer.h"
#include "mpi_check.h"

namespace lansbert {

namespace {

// The benchmark's buffer: host memory, or n floats of `memory` with host staging for the
// check values.
class BenchBuffer {
 public:
  BenchBuffer(Allocator* memory, size_t n) : memory_(memory), host_(n, 0.f), n_(n) {
    if (memory_) data_ = static_cast<float*>(memory_->allocate(n * sizeof(float)));
  }
  ~BenchBuffer() {
    if (memory_) memory_->deallocate(data_);
  }
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  float* data() { return memory_ ? data_ : host_.data(); }
  std::vector<float>& host() { return host_; }  // staging: push() after writing, pull() before reading
  void push() {
    if (memory_) memory_->copy_from_host(data_, host_.data(), n_ * sizeof(float));
  }
  void pull() {
    if (memory_) memory_->copy_to_host(host_.data(), data_, n_ * sizeof(float));
  }

 private:
  Allocator* memory_;
  std::vector<float> host_;
  size_t n_;
  float* data_ = nullptr;
};

}  // namespace

std::vector<CommBenchRow> bench_all_reduce(Communicator& comm, const std::vector<size_t>& sizes,
                                           int iters, int warmup, bool plain_mpi, Allocator* memory,
                                           Communicator* host, GradWire wire) {
  Communicator& scalars = host ? *host : comm;
  LB_CHECK_MSG(!plain_mpi || std::strcmp(comm.kind(), "mpi") == 0 || comm.world() == 1,
               "the plain MPI baseline needs an MPI communicator");
  LB_CHECK_MSG(!plain_mpi || memory == nullptr, "the plain MPI baseline runs on host buffers");
  LB_CHECK_MSG(!plain_mpi || !wire, "the plain MPI baseline reduces floats");
  const size_t elem_bytes = wire ? sizeof(uint16_t) : sizeof(float);
  const int W = comm.world();
  std::vector<CommBenchRow> rows;
  size_t last_n = 0;
  for (size_t bytes : sizes) {
    const size_t n = std::max<size_t>(bytes / elem_bytes, 1);
    if (n == last_n) continue;  // two sizes of one element count (33 and 32 bytes): one row
    last_n = n;
    BenchBuffer buf(memory, n);
    Buffer<uint16_t> wire_buf(wire ? n : 0, memory ? *memory : host_allocator());
    auto run = [&] {
      if (wire) {
        comm.all_reduce_half_async(buf.data(), wire_buf.data(), n, ReduceOp::kSum, *wire);
        comm.wait_all();
      } else if (plain_mpi && W > 1) {
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD));
      } else {
        comm.all_reduce(buf.data(), n, ReduceOp::kSum);
      }
    };
    CommBenchRow row;
    row.bytes = n * elem_bytes;
    std::vector<float>& h = buf.host();
    // Element i comes from rank i % W alone (the others add zeros), so the sum is exact at
    // any rank count in fp32, bf16 and fp16, and a rank whose part went missing shows.
    const auto owner_value = [](size_t i) { return float(int(i % 3) + 1); };
    for (size_t i = 0; i < n; ++i) h[i] = int(i % size_t(W)) == comm.rank() ? owner_value(i) : 0.f;
    buf.push();
    run();
    buf.pull();
    for (size_t i = 0; i < n; ++i)
      if (h[i] != owner_value(i)) row.correct = false;
    std::fill(h.begin(), h.end(), 0.f);  // zeros stay zeros: no overflow over iterations
    buf.push();
    for (int i = 0; i < warmup; ++i) run();
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) run();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    scalars.all_reduce(&s, 1, ReduceOp::kMax);
    row.time_us = s * 1e6;
    row.algbw_gbs = row.bytes / s / 1e9;
    row.busbw_gbs = W > 1 ? row.algbw_gbs * 2.0 * (W - 1) / W : 0.0;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace lansbert
