// The MPI communicator over host buffers (CPU backend), on a duplicate of MPI_COMM_WORLD with
// MPI_ERRORS_RETURN so that every failure reaches MPI_CHECK. Two reduction orders (see
// CommOptions): the library's own, and a fixed rank order built from all-to-all, an ordered
// local sum and all-gather. Counts above INT_MAX are split into pieces. Gradients can also
// travel in 16 bits (kernels/grad_wire.h): MPI has no bf16 or fp16 type, so the wire is
// MPI_UINT16_T with a user-defined sum per format.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "lansbert/dist/mpi_session.h"
#include "lansbert/kernels/grad_wire.h"
#include "mpi_check.h"

namespace lansbert {

namespace {

constexpr size_t kMaxPiece = size_t(1) << 30;  // elements per MPI call (fits an int)

template <typename T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <>
MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <>
MPI_Datatype mpi_type<uint16_t>() { return MPI_UINT16_T; }  // the 16-bit wire

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM; }

// The user reductions of the 16-bit wire: inout[i] = in[i] + inout[i], rounded.
template <kern::HalfFormat F>
void wire_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = kern::wire_add(a[i], b[i], F);
}

// How the fixed-order sums accumulate: values as they are (float, double), or 16-bit wire
// values widened to fp32 and the sum rounded back once.
struct AsIs {
  template <typename X>
  X operator()(X x) const { return x; }
};
struct Widen16 {
  kern::HalfFormat f;
  float operator()(uint16_t h) const { return kern::half_to_float(h, f); }
};
struct Narrow16 {
  kern::HalfFormat f;
  uint16_t operator()(float x) const { return kern::float_to_half(x, f); }
};

void to_wire(const float* x, uint16_t* w, size_t n, float scale, kern::HalfFormat f) {
  kern::with_half_format(f, [&](auto F) {
    for (size_t i = 0; i < n; ++i) w[i] = kern::grad_to_wire(x[i], scale, F);
  });
}
void from_wire(const uint16_t* w, float* x, size_t n, kern::HalfFormat f) {
  kern::with_half_format(f, [&](auto F) {
    for (size_t i = 0; i < n; ++i) x[i] = kern::half_to_float(w[i], F);
  });
}

template <typename T>
void scale_avg(T* data, size_t count, int world, ReduceOp op) {
  if (op != ReduceOp::kAvg || world == 1) return;
  const T n = static_cast<T>(world);
  for (size_t i = 0; i < count; ++i) data[i] /= n;  // exact for power-of-two worlds
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<MpiSession> session, const CommOptions& options)
      : session_(std::move(session)), options_(options) {
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MPI_CHECK(MPI_Comm_size(comm_, &world_));
    MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_));
    MPI_CHECK(MPI_Comm_rank(local_, &local_rank_));
    MPI_CHECK(MPI_Comm_size(local_, &local_world_));
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    host_.assign(name, len);
    MPI_CHECK(MPI_Op_create(&wire_sum<kern::HalfFormat::kBf16>, 1, &sum_bf16_));
    MPI_CHECK(MPI_Op_create(&wire_sum<kern::HalfFormat::kFp16>, 1, &sum_fp16_));
  }
  ~MpiCommunicator() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    wait_all();
    MPI_Op_free(&sum_bf16_);
    MPI_Op_free(&sum_fp16_);
    MPI_Comm_free(&local_);
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  int local_world() const override { return local_world_; }
  std::string hostname() const override { return host_; }
  const char* kind() const override { return "mpi"; }

  void all_reduce(float* data, size_t count, ReduceOp op) override { reduce_all(data, count, op); }
  void all_reduce(double* data, size_t count, ReduceOp op) override { reduce_all(data, count, op); }

  void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) override {
    if (fixed_order(op)) {
      ordered_reduce_scatter(send, recv, count);
    } else {
      // MPI_Reduce_scatter_block takes one count per rank: split into pieces of the blocks.
      for (size_t off = 0; off < count; off += kMaxPiece) {
        const size_t n = std::min(kMaxPiece, count - off);
        const float* src = send;
        if (count > kMaxPiece) {  // gather this piece of every block into a contiguous send
          piece_.resize(n * world_);
          for (int r = 0; r < world_; ++r)
            std::memcpy(&piece_[size_t(r) * n], send + size_t(r) * count + off, n * sizeof(float));
          src = piece_.data();
        }
        MPI_CHECK(MPI_Reduce_scatter_block(src, recv + off, static_cast<int>(n), MPI_FLOAT,
                                           mpi_op(op), comm_));
      }
    }
    scale_avg(recv, count, world_, op);
  }

  void all_gather(const float* send, float* recv, size_t count) override {
    LB_CHECK_MSG(count <= kMaxPiece, "all_gather of more than 2^30 elements per rank");
    const bool in_place = send == recv + size_t(rank_) * count;
    MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, static_cast<int>(count), MPI_FLOAT,
                            recv, static_cast<int>(count), MPI_FLOAT, comm_));
  }

  void broadcast(void* data, size_t bytes, int root) override {
    char* p = static_cast<char*>(data);
    for (size_t off = 0; off < bytes; off += kMaxPiece) {
      const size_t n = std::min(kMaxPiece, bytes - off);
      MPI_CHECK(MPI_Bcast(p + off, static_cast<int>(n), MPI_BYTE, root, comm_));
    }
  }
  void barrier() override { MPI_CHECK(MPI_Barrier(comm_)); }

  void all_reduce_async(float* data, size_t count, ReduceOp op) override {
    // One rank: the identity, as in reduce_all. A one-rank device run (mpirun -np 1, backend:
    // cuda) has no NCCL communicator, so GradSync hands this device pointers, which a
    // non-CUDA-aware MPI must never be given.
    if (world_ == 1) return;
    if (fixed_order(op)) {  // no overlap in fixed order: done here, in full
      all_reduce(data, count, op);
      return;
    }
    start_in_pieces(data, MPI_FLOAT, mpi_op(op), {MPI_REQUEST_NULL, data, count, op});
  }
  void progress() override {
    if (requests_.empty()) return;
    int done = 0;
    MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                          MPI_STATUSES_IGNORE));
  }
  void wait_all() override {
    if (requests_.empty()) return;
    MPI_CHECK(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(),
                          MPI_STATUSES_IGNORE));
    for (const Pending& p : pending_) {
      if (!p.result_here) continue;  // a reduction to another rank
      if (p.wire)
        from_wire(p.wire, p.data, p.count, p.format);  // an average was scaled before the sum
      else
        scale_avg(p.data, p.count, world_, p.op);
    }
    pending_.clear();
    requests_.clear();
  }

  void all_reduce_half_async(float* data, uint16_t* wire, size_t count, ReduceOp op,
                             kern::HalfFormat f) override {
    if (world_ == 1) return;  // nothing travels; and the buffers may be a device's
    to_wire(data, wire, count, grad_wire_scale(op, world_), f);
    if (options_.order == ReductionOrder::kFixedOrder) {
      ordered_all_reduce(wire, count, Widen16{f}, Narrow16{f});
      from_wire(wire, data, count, f);
      return;
    }
    start_in_pieces(wire, MPI_UINT16_T, wire_op(f), {MPI_REQUEST_NULL, data, count, op, wire, f});
  }

  void reduce_async(float* data, size_t count, ReduceOp op, int root) override {
    if (world_ == 1) return;
    start_in_pieces(data, MPI_FLOAT, mpi_op(op), {MPI_REQUEST_NULL, data, count, op}, root);
  }
  void reduce_half_async(float* data, uint16_t* wire, size_t count, ReduceOp op, int root,
                         kern::HalfFormat f) override {
    if (world_ == 1) return;
    to_wire(data, wire, count, grad_wire_scale(op, world_), f);
    start_in_pieces(wire, MPI_UINT16_T, wire_op(f), {MPI_REQUEST_NULL, data, count, op, wire, f}, root);
  }

  void reduce_scatter_half(const float* send, uint16_t* wire, float* recv, size_t count,
                           ReduceOp op, kern::HalfFormat f) override {
    if (world_ == 1) {
      if (send != recv) std::memmove(recv, send, count * sizeof(float));
      return;
    }
    LB_CHECK_MSG(count <= kMaxPiece, "16-bit reduce_scatter of more than 2^30 elements per rank");
    to_wire(send, wire, count * world_, grad_wire_scale(op, world_), f);
    if (options_.order == ReductionOrder::kFixedOrder) {
      ordered_sum_of_blocks(wire, wire, count, &stage_w_, Widen16{f}, Narrow16{f});
    } else {  // in place: the input is all of `wire`, block r's sum lands at its start
      MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, wire, static_cast<int>(count),
                                         MPI_UINT16_T, wire_op(f), comm_));
    }
    from_wire(wire, recv, count, f);
  }

 private:
  struct Pending {
    MPI_Request req;
    float* data;
    size_t count;
    ReduceOp op;
    uint16_t* wire = nullptr;  // a 16-bit reduction: widened into data when complete
    kern::HalfFormat format = kern::HalfFormat::kBf16;
    bool result_here = true;   // false: a reduction whose result lands on another rank
  };

  // Starts in-place reductions of `buf` (what travels: p.wire or p.data) in pieces that fit
  // an int, each pending with its part of p: MPI_Iallreduce, or with root >= 0 MPI_Ireduce to
  // that rank (in place there; the others only send).
  template <typename E>
  void start_in_pieces(E* buf, MPI_Datatype type, MPI_Op op, Pending p, int root = -1) {
    p.result_here = root < 0 || rank_ == root;
    for (size_t off = 0; off < p.count; off += kMaxPiece) {
      Pending piece = p;
      piece.count = std::min(kMaxPiece, p.count - off);
      piece.data = p.data + off;
      if (p.wire) piece.wire = p.wire + off;
      E* b = buf + off;
      const int n = static_cast<int>(piece.count);
      if (root < 0)
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, b, n, type, op, comm_, &piece.req));
      else
        MPI_CHECK(MPI_Ireduce(p.result_here ? MPI_IN_PLACE : b, b, n, type, op, root, comm_, &piece.req));
      pending_.push_back(piece);
      requests_.push_back(piece.req);
    }
  }

  MPI_Op wire_op(kern::HalfFormat f) const {
    return f == kern::HalfFormat::kBf16 ? sum_bf16_ : sum_fp16_;
  }

  bool fixed_order(ReduceOp op) const {
    return options_.order == ReductionOrder::kFixedOrder && op != ReduceOp::kMax && world_ > 1;
  }

  template <typename T>
  void reduce_all(T* data, size_t count, ReduceOp op) {
    if (world_ == 1) return;
    if (fixed_order(op)) {
      ordered_all_reduce(data, count);
    } else {
      for (size_t off = 0; off < count; off += kMaxPiece) {
        const size_t n = std::min(kMaxPiece, count - off);
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + off, static_cast<int>(n), mpi_type<T>(),
                                mpi_op(op), comm_));
      }
    }
    scale_avg(data, count, world_, op);
  }

  // Rank r receives block r of every rank (all-to-all) and sums them in rank order:
  // out[i] = narrow(widen(block_0[i]) + widen(block_1[i]) + ...). `send` may alias `out`.
  template <typename T, typename Widen = AsIs, typename Narrow = AsIs>
  void ordered_sum_of_blocks(const T* send, T* out, size_t block, std::vector<T>* stage,
                             Widen widen = {}, Narrow narrow = {}) {
    stage->resize(block * world_);
    MPI_CHECK(MPI_Alltoall(send, static_cast<int>(block), mpi_type<T>(), stage->data(),
                           static_cast<int>(block), mpi_type<T>(), comm_));
    const T* s = stage->data();
    for (size_t i = 0; i < block; ++i) {
      auto acc = widen(s[i]);
      for (int r = 1; r < world_; ++r) acc += widen(s[size_t(r) * block + i]);
      out[i] = narrow(acc);
    }
  }

  void ordered_reduce_scatter(const float* send, float* recv, size_t count) {
    LB_CHECK_MSG(count <= kMaxPiece, "fixed-order reduce_scatter of more than 2^30 per rank");
    ordered_sum_of_blocks(send, recv, count, &stage_f_);
  }

  // Pads each piece to world * block, sums block r on rank r in rank order (above, with the
  // same widen/narrow), all-gathers.
  template <typename T, typename Widen = AsIs, typename Narrow = AsIs>
  void ordered_all_reduce(T* data, size_t count, Widen widen = {}, Narrow narrow = {}) {
    std::vector<T> send, stage, mine;
    const size_t piece_max = kMaxPiece / 4;
    for (size_t off = 0; off < count; off += piece_max) {
      const size_t n = std::min(piece_max, count - off);
      const size_t block = (n + world_ - 1) / world_;
      send.assign(block * world_, T(0));
      std::memcpy(send.data(), data + off, n * sizeof(T));
      mine.resize(block);
      ordered_sum_of_blocks(send.data(), mine.data(), block, &stage, widen, narrow);
      MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(block), mpi_type<T>(), send.data(),
                              static_cast<int>(block), mpi_type<T>(), comm_));
      std::memcpy(data + off, send.data(), n * sizeof(T));
    }
  }

  std::shared_ptr<MpiSession> session_;  // outlives comm_: MPI_Finalize after MPI_Comm_free
  CommOptions options_;
  MPI_Comm comm_ = MPI_COMM_NULL, local_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_world_ = 1;
  std::string host_;
  MPI_Op sum_bf16_ = MPI_OP_NULL, sum_fp16_ = MPI_OP_NULL;
  std::vector<float> piece_, stage_f_;
  std::vector<uint16_t> stage_w_;
  std::vector<Pending> pending_;
  std::vector<MPI_Request> requests_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& options) {
  return std::make_unique<MpiCommunicator>(MpiSession::acquire(), options);
}

}  // namespace lansbert
