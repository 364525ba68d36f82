// Runs the arithmetic of a cuDNN operation graph on the CPU, from the plain records a
// dnn::GraphBuilder keeps (dnn_graph.h), so that what the graphs compute can be checked
// against a reference on a machine without a GPU. cuDNN's own checks stop at "well formed".
//
// Semantics, as cuDNN documents them for the operations our graphs use:
//  - every tensor is 4-D memory addressed through its strides; virtual tensors get memory
//    here, filled with NaN so that reading an element no operation wrote shows up;
//  - a write rounds to the tensor's type (bf16 with the shared rounding, fp32, or exact
//    for INT32/BOOLEAN);
//  - POINTWISE broadcasts inputs whose extent is 1; GEN_INDEX gives the index along
//    `axis`; BINARY_SELECT is y = t ? x : b;
//  - REDUCTION (ADD, MAX) folds the dimensions where y has extent 1;
//  - MATMUL multiplies the last two dimensions, batch dimensions broadcast; the M, N and K
//    overrides (per-batch int32 tensors) limit the rows and columns written and the terms
//    summed;
//  - RESHAPE gives y the memory of x, read through y's dimensions and strides (how a
//    transpose is spelled).
// Values are doubles; nothing here models cuDNN's blocking or its summation order.
#pragma once

#if LANSBERT_HAVE_CUDNN

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dnn_graph.h"
#include "lansbert/kernels/half.h"

namespace lansbert::testing {

class GraphInterpreter {
 public:
  explicit GraphInterpreter(const cuda::dnn::GraphBuilder& g) : ops_(g.op_records()) {
    for (const cuda::dnn::TensorRecord& t : g.tensor_records()) tensors_[t.uid] = {t, {}};
  }

  // Memory of a non-virtual tensor (span() doubles), or the value of a by-value one.
  void set(int64_t uid, std::vector<double> memory) {
    Tensor& t = at(uid);
    if (memory.size() != span(t.rec)) throw std::runtime_error("uid " + std::to_string(uid) + ": wrong size");
    for (double& v : memory) v = round_to(t.rec.type, v);
    t.mem = std::move(memory);
  }
  const std::vector<double>& get(int64_t uid) { return at(uid).mem; }
  static size_t span(const cuda::dnn::TensorRecord& r) {
    size_t last = 0;
    for (int i = 0; i < 4; ++i) last += size_t(r.dims[i] - 1) * size_t(r.strides[i]);
    return last + 1;
  }

  // Runs the operations in order. Non-virtual tensors nobody set (outputs, workspaces) start
  // as NaN like the virtual ones.
  void run() {
    for (auto& [uid, t] : tensors_)
      if (t.mem.empty()) t.mem.assign(span(t.rec), std::numeric_limits<double>::quiet_NaN());
    for (const cuda::dnn::OpRecord& op : ops_) {
      using Kind = cuda::dnn::OpRecord::Kind;
      switch (op.kind) {
        case Kind::kPointwise: pointwise(op); break;
        case Kind::kReduction: reduction(op); break;
        case Kind::kMatmul: matmul(op); break;
        case Kind::kReshape: reshape(op); break;
        default: throw std::runtime_error("operation kind not interpreted");
      }
    }
  }

 private:
  struct Tensor {
    cuda::dnn::TensorRecord rec;
    std::vector<double> mem;
  };
  using Index = std::array<int64_t, 4>;

  Tensor& at(int64_t uid) {
    auto it = tensors_.find(uid);
    if (it == tensors_.end()) throw std::runtime_error("no tensor with uid " + std::to_string(uid));
    return it->second;
  }
  static double round_to(cudnnDataType_t type, double v) {
    if (type == CUDNN_DATA_BFLOAT16) return kern::round_to_bf16(float(v));
    if (type == CUDNN_DATA_FLOAT) return double(float(v));
    return v;
  }
  // Offset of index i in t, with extent-1 dimensions broadcast.
  static size_t offset(const Tensor& t, const Index& i) {
    size_t o = 0;
    for (int d = 0; d < 4; ++d) o += size_t(t.rec.dims[d] == 1 ? 0 : i[d]) * size_t(t.rec.strides[d]);
    return o;
  }
  template <class Fn>
  static void for_each(const cuda::dnn::Dims& dims, Fn&& fn) {
    Index i{};
    for (i[0] = 0; i[0] < dims[0]; ++i[0])
      for (i[1] = 0; i[1] < dims[1]; ++i[1])
        for (i[2] = 0; i[2] < dims[2]; ++i[2])
          for (i[3] = 0; i[3] < dims[3]; ++i[3]) fn(i);
  }
  void write(Tensor& y, const Index& i, double v) { y.mem[offset(y, i)] = round_to(y.rec.type, v); }

  void pointwise(const cuda::dnn::OpRecord& op) {
    Tensor& y = at(op.out);
    const Tensor& x = at(op.in[0]);
    const Tensor* b = op.in[1] >= 0 ? &at(op.in[1]) : nullptr;
    const Tensor* t = op.in[2] >= 0 ? &at(op.in[2]) : nullptr;
    for_each(y.rec.dims, [&](const Index& i) {
      const double xv = x.mem[offset(x, i)];
      const double bv = b ? b->mem[offset(*b, i)] : 0.0;
      double v = 0;
      switch (cudnnPointwiseMode_t(op.mode)) {
        case CUDNN_POINTWISE_ADD: v = xv + bv; break;
        case CUDNN_POINTWISE_SUB: v = xv - bv; break;
        case CUDNN_POINTWISE_MUL: v = xv * bv; break;
        case CUDNN_POINTWISE_DIV: v = xv / bv; break;
        case CUDNN_POINTWISE_EXP: v = std::exp(xv); break;
        case CUDNN_POINTWISE_LOG: v = std::log(xv); break;
        case CUDNN_POINTWISE_IDENTITY: v = xv; break;
        case CUDNN_POINTWISE_GEN_INDEX: v = double(i[size_t(op.axis)]); break;
        case CUDNN_POINTWISE_CMP_LT: v = xv < bv ? 1 : 0; break;
        case CUDNN_POINTWISE_LOGICAL_AND: v = (xv != 0 && bv != 0) ? 1 : 0; break;
        case CUDNN_POINTWISE_BINARY_SELECT: v = t->mem[offset(*t, i)] != 0 ? xv : bv; break;
        default: throw std::runtime_error("pointwise mode " + std::to_string(op.mode) + " not interpreted");
      }
      write(y, i, v);
    });
  }

  void reduction(const cuda::dnn::OpRecord& op) {
    Tensor& y = at(op.out);
    const Tensor& x = at(op.in[0]);
    const bool max = cudnnReduceTensorOp_t(op.mode) == CUDNN_REDUCE_TENSOR_MAX;
    if (!max && cudnnReduceTensorOp_t(op.mode) != CUDNN_REDUCE_TENSOR_ADD)
      throw std::runtime_error("reduction " + std::to_string(op.mode) + " not interpreted");
    std::map<size_t, double> acc;
    for_each(x.rec.dims, [&](const Index& i) {
      const size_t o = offset(y, i);
      const double v = x.mem[offset(x, i)];
      auto [it, fresh] = acc.emplace(o, v);
      if (!fresh) it->second = max ? std::max(it->second, v) : it->second + v;
    });
    for (const auto& [o, v] : acc) y.mem[o] = round_to(y.rec.type, v);
  }

  // Per-batch extent from an override tensor ([B,1,1,1] int32), or `full` without one.
  int64_t extent(int64_t uid, const Index& i, int64_t full) {
    if (uid < 0) return full;
    const Tensor& t = at(uid);
    return int64_t(t.mem[offset(t, i)]);
  }

  void matmul(const cuda::dnn::OpRecord& op) {
    Tensor& c = at(op.out);
    const Tensor& a = at(op.in[0]);
    const Tensor& b = at(op.in[1]);
    const int64_t K = a.rec.dims[3];
    if (b.rec.dims[2] != K) throw std::runtime_error("matmul: inner extents differ");
    for_each(c.rec.dims, [&](const Index& i) {
      const Index batch{i[0], i[1], 0, 0};
      if (i[2] >= extent(op.in[2], batch, c.rec.dims[2]) || i[3] >= extent(op.in[3], batch, c.rec.dims[3])) return;
      const int64_t k_end = extent(op.in[4], batch, K);
      double sum = 0;
      for (int64_t k = 0; k < k_end; ++k)
        sum += a.mem[offset(a, {i[0], i[1], i[2], k})] * b.mem[offset(b, {i[0], i[1], k, i[3]})];
      write(c, i, sum);
    });
  }

  void reshape(const cuda::dnn::OpRecord& op) {
    Tensor& y = at(op.out);
    const Tensor& x = at(op.in[0]);
    if (span(y.rec) != x.mem.size()) throw std::runtime_error("reshape: spans differ");
    for (size_t k = 0; k < x.mem.size(); ++k) y.mem[k] = round_to(y.rec.type, x.mem[k]);
  }

  std::vector<cuda::dnn::OpRecord> ops_;
  std::map<int64_t, Tensor> tensors_;
};

}  // namespace lansbert::testing

#endif  // LANSBERT_HAVE_CUDNN
