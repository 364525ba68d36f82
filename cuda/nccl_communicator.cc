// NCCL communicator: collectives over device buffers, bootstrapped over MPI (or any
// Communicator), with a host-side watchdog: every wait polls cudaStreamQuery and
// ncclCommGetAsyncError, and on an error or after NcclOptions::timeout_s calls ncclCommAbort
// and fatal_error (which aborts the MPI job). PyTorch's NCCL_ASYNC_ERROR_HANDLING is this same
// loop; NCCL itself does not read that variable.
// The trainer builds it through DeviceBackend::make_communicator (backend: cuda, world > 1).
// Status: compiled and linked in CI; NOT yet run on a GPU (no multi-GPU machine so far).
#include "nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <thread>
#include <vector>

#include "cuda_check.cuh"
#include "grad_wire.h"

#define NCCL_CHECK(stmt)                                                                 \
  do {                                                                                   \
    ncclResult_t lb_nr_ = (stmt);                                                        \
    if (lb_nr_ != ncclSuccess)                                                           \
      ::lansbert::fatal_error(__FILE__, __LINE__, #stmt,                                 \
                              ::lansbert::cuda::device_context(ncclGetErrorString(lb_nr_))); \
  } while (0)

namespace lansbert::cuda {

namespace {

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    default: return ncclSum;
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, const NcclOptions& options)
      : options_(options),
        rank_(bootstrap.rank()),
        world_(bootstrap.world()),
        local_rank_(bootstrap.local_rank()),
        local_world_(bootstrap.local_world()),
        host_(bootstrap.hostname()) {
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    LB_CHECK_MSG(devices > 0, "no CUDA device for the NCCL communicator");
    // The device the backend bound for this rank (device_for_rank: the local rank, or device
    // 0 when the scheduler shows each rank only its own GPU).
    CUDA_CHECK(cudaGetDevice(&device_));
    ncclUniqueId id;
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    bootstrap.broadcast(&id, sizeof(id), 0);
    NCCL_CHECK(ncclCommInitRank(&comm_, world_, id, rank_));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&legacy_done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
  }
  ~NcclCommunicator() override {
    // With a reduction still in flight (only on an error path: the trainer waits for its
    // buckets before anything else) ncclCommDestroy would wait for peers that may never
    // come; ncclCommAbort returns without them.
    if (comm_) {
      if (pending_)
        ncclCommAbort(comm_);
      else
        ncclCommDestroy(comm_);
    }
    cudaFree(scratch_);
    cudaEventDestroy(compute_done_);
    cudaEventDestroy(legacy_done_);
    cudaEventDestroy(comm_done_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  int local_world() const override { return local_world_; }
  std::string hostname() const override { return host_; }
  const char* kind() const override { return "nccl"; }

  void all_reduce(float* data, size_t count, ReduceOp op) override {
    after_compute();
    NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat, nccl_op(op), comm_, stream_));
    wait_stream("ncclAllReduce");
  }
  void all_reduce(double* data, size_t count, ReduceOp op) override {
    after_compute();
    NCCL_CHECK(ncclAllReduce(data, data, count, ncclDouble, nccl_op(op), comm_, stream_));
    wait_stream("ncclAllReduce");
  }
  void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) override {
    after_compute();
    NCCL_CHECK(ncclReduceScatter(send, recv, count, ncclFloat, nccl_op(op), comm_, stream_));
    wait_stream("ncclReduceScatter");
  }
  void all_gather(const float* send, float* recv, size_t count) override {
    after_compute();  // in place when send == recv + rank*count, which NCCL supports
    NCCL_CHECK(ncclAllGather(send, recv, count, ncclFloat, comm_, stream_));
    wait_stream("ncclAllGather");
  }
  void broadcast(void* data, size_t bytes, int root) override {
    after_compute();
    NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclChar, root, comm_, stream_));
    wait_stream("ncclBroadcast");
  }
  void barrier() override { all_reduce(scratch_, 1, ReduceOp::kSum); }

  void all_reduce_async(float* data, size_t count, ReduceOp op) override {
    after_compute();
    NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat, nccl_op(op), comm_, stream_));
    pending_ = true;
  }
  // The 16-bit wire: rounding, the NCCL sum in bf16/fp16 and the widening all run on the
  // communication stream, in order after the compute stream. Also on one rank (a rounding
  // and NCCL's identity), which is what a one-GPU test can check of this path.
  void all_reduce_half_async(float* data, uint16_t* wire, size_t count, ReduceOp op,
                             kern::HalfFormat f) override {
    after_compute();
    grads_to_wire(data, wire, count, grad_wire_scale(op, world_), f, stream_);
    NCCL_CHECK(ncclAllReduce(wire, wire, count, nccl_half(f), ncclSum, comm_, stream_));
    grads_from_wire(wire, data, count, f, stream_);
    pending_ = true;
  }
  // Reductions to one rank (the sharded optimizer's buckets), in place at the root.
  void reduce_async(float* data, size_t count, ReduceOp op, int root) override {
    after_compute();
    NCCL_CHECK(ncclReduce(data, data, count, ncclFloat, nccl_op(op), root, comm_, stream_));
    pending_ = true;
  }
  void reduce_half_async(float* data, uint16_t* wire, size_t count, ReduceOp op, int root,
                         kern::HalfFormat f) override {
    after_compute();
    grads_to_wire(data, wire, count, grad_wire_scale(op, world_), f, stream_);
    NCCL_CHECK(ncclReduce(wire, wire, count, nccl_half(f), ncclSum, root, comm_, stream_));
    if (rank_ == root) grads_from_wire(wire, data, count, f, stream_);
    pending_ = true;
  }
  void reduce_scatter_half(const float* send, uint16_t* wire, float* recv, size_t count,
                           ReduceOp op, kern::HalfFormat f) override {
    after_compute();
    grads_to_wire(send, wire, count * world_, grad_wire_scale(op, world_), f, stream_);
    uint16_t* mine = wire + size_t(rank_) * count;  // in place, which NCCL supports
    NCCL_CHECK(ncclReduceScatter(wire, mine, count, nccl_half(f), ncclSum, comm_, stream_));
    grads_from_wire(mine, recv, count, f, stream_);
    wait_stream("ncclReduceScatter (16-bit)");
  }
  void progress() override { check_async_error("(progress)"); }
  void wait_all() override {
    if (!pending_) return;
    // The host waits too (polling, with the error check and the timeout) rather than only
    // ordering the compute stream: what follows reads the reduced gradients at once (the
    // optimizer brings its norms to the host), and a wait inside a CUDA call could not be
    // aborted if a peer hangs. The event still orders later compute-stream work explicitly.
    wait_stream("all_reduce_async (wait_all)");
    CUDA_CHECK(cudaEventRecord(comm_done_, stream_));
    CUDA_CHECK(cudaStreamWaitEvent(compute_, comm_done_, 0));
    pending_ = false;
  }

  void set_compute_stream(cudaStream_t s) { compute_ = s; }

 private:
  static ncclDataType_t nccl_half(kern::HalfFormat f) {
    return f == kern::HalfFormat::kBf16 ? ncclBfloat16 : ncclFloat16;
  }

  // The communication stream starts after what the compute stream has queued so far, and
  // after the legacy default stream, where the device optimizer runs (the sharded step's
  // all-gather reads the parameters it has just written). The NCCL stream is non-blocking,
  // so neither ordering happens implicitly. While the compute stream is a blocking one (it
  // is: cuda_raii.cuh), the record on the legacy stream already follows the compute stream's
  // work, so the first wait is redundant; it keeps the order right if that ever changes.
  void after_compute() {
    CUDA_CHECK(cudaEventRecord(compute_done_, compute_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_done_, 0));
    if (compute_ != cudaStreamLegacy && compute_ != nullptr) {
      CUDA_CHECK(cudaEventRecord(legacy_done_, cudaStreamLegacy));
      CUDA_CHECK(cudaStreamWaitEvent(stream_, legacy_done_, 0));
    }
  }

  void check_async_error(const char* what) {
    ncclResult_t async = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      fatal_error(__FILE__, __LINE__, what,
                  std::string("asynchronous NCCL error: ") + ncclGetErrorString(async));
    }
  }

  // Polls until the stream is idle; aborts on an NCCL error or after timeout_s.
  void wait_stream(const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) CUDA_CHECK(q);
      // "Not ready" is an answer, not a fault, but a runtime may keep it as the thread's last
      // error (PyTorch clears it after every such query: pytorch/pytorch#18584, #61554), and
      // the next kernel's LB_LAUNCH_CHECK would then end the run on it. Real faults are sticky
      // and come back from the next call anyway.
      (void)cudaGetLastError();
      check_async_error(what);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s > options_.timeout_s) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        fatal_error(__FILE__, __LINE__, what,
                    "NCCL collective did not finish in " + std::to_string(options_.timeout_s) +
                        " s (a peer died or hangs); aborting the job");
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  NcclOptions options_;
  int rank_, world_, local_rank_, local_world_, device_ = 0;
  std::string host_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr, compute_ = nullptr;  // compute_: default stream unless set
  cudaEvent_t compute_done_ = nullptr, legacy_done_ = nullptr, comm_done_ = nullptr;
  float* scratch_ = nullptr;
  bool pending_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap,
                                                     const NcclOptions& options) {
  return std::make_unique<NcclCommunicator>(bootstrap, options);
}

void set_nccl_compute_stream(Communicator& nccl, void* stream) {
  LB_CHECK_MSG(std::string(nccl.kind()) == "nccl", "not an NCCL communicator");
  static_cast<NcclCommunicator&>(nccl).set_compute_stream(static_cast<cudaStream_t>(stream));
}

}  // namespace lansbert::cuda
