// A thin layer over cuDNN's backend (graph) API (dnn_graph.h, not to shadow cuDNN's own
// cudnn_graph.h): owned descriptors, a builder that turns
// tensors and operations into descriptors and keeps the first error instead of throwing
// (every later call is a no-op), and the heuristics -> engine config -> execution plan
// search. Failures are messages for the caller's fallback log line, never fatal.
#pragma once

#if LANSBERT_HAVE_CUDNN

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "cudnn_api.h"

namespace lansbert::cuda::dnn {

using Dims = std::array<int64_t, 4>;

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptor_t d) : d_(d) {}
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc();
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A finalized execution plan and everything it refers to.
struct Plan {
  std::vector<Desc> keep;   // tensors, operations, graph, engine config (destroyed last)
  Desc plan;
  int64_t workspace = 0;    // bytes the plan needs at execute time
  std::string engine;       // "engine 3 of 7 (heuristics A)", for logs
};

// A plain record of what a builder made: tensors, and operations in the order added, by
// uid. cuDNN only says whether a graph is well formed; tests run its arithmetic on the CPU
// from these records (tests/gpu/graph_interpreter.h).
struct TensorRecord {
  int64_t uid = -1;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  Dims dims{}, strides{};
  bool is_virtual = false, by_value = false;
};
struct OpRecord {
  enum class Kind { kPointwise, kReduction, kMatmul, kReshape, kOther };
  Kind kind = Kind::kOther;
  int mode = -1;            // cudnnPointwiseMode_t or cudnnReduceTensorOp_t
  int64_t axis = -1;        // GEN_INDEX's axis
  std::vector<int64_t> in;  // pointwise x, b, t; reduction and reshape x; matmul a, b and
                            // the m, n, k overrides; -1 where absent
  int64_t out = -1;
};

class GraphBuilder {
 public:
  GraphBuilder();
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // Records `what` as the error unless one is recorded already.
  void fail(const std::string& what);

  // A tensor; virtual ones live only inside the fused kernel, by-value ones are host scalars.
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                                  bool is_virtual = false, bool by_value = false);
  // y = mode(x[, b[, t]]) computed in `math`; `axis` for GEN_INDEX (else -1).
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, cudnnDataType_t math = CUDNN_DATA_FLOAT,
                 int64_t axis = -1);
  // y = reduce(x) over the dimensions where y has extent 1.
  void reduction(cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
  // c = a b over the last two dimensions (fp32 accumulation); the overrides are per-batch
  // int32 extents (sequence lengths) or null.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
              cudnnBackendDescriptor_t m_override = nullptr, cudnnBackendDescriptor_t n_override = nullptr,
              cudnnBackendDescriptor_t k_override = nullptr);
  // y is x seen with other dimensions/strides (how a transpose is spelled inside a graph).
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
  // Any other operation: `type` with descriptor-valued attributes (null ones skipped).
  struct Attr {
    cudnnBackendAttributeName_t name;
    cudnnBackendDescriptor_t value;
  };
  void operation(cudnnBackendDescriptorType_t type, const std::vector<Attr>& attrs, const char* what);

  // Finalizes the operations so far as one graph. With a null handle (no device) cuDNN still
  // checks the graph's structure, which the tests use on machines without a GPU.
  bool finalize_graph(cudnnHandle_t handle);
  // The graph on `handle`, then the first engine config of heuristics mode A (then the
  // fallback list) whose execution plan finalizes. False with error() set otherwise. The
  // builder is spent afterwards (its descriptors move into the plan).
  bool build_plan(cudnnHandle_t handle, Plan* out);
  size_t operation_count() const { return ops_.size(); }
  const std::vector<TensorRecord>& tensor_records() const { return tensor_records_; }
  const std::vector<OpRecord>& op_records() const { return op_records_; }

 private:
  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type, const char* what);
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, const void* values, const char* what);
  void finalize(cudnnBackendDescriptor_t d, const char* what);
  bool try_heuristics(cudnnHandle_t handle, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                      const char* mode_name, Plan* out, std::string* tried);

  void add_operation(cudnnBackendDescriptorType_t type, const std::vector<Attr>& attrs, const char* what);
  int64_t uid_of(cudnnBackendDescriptor_t t) const;
  void record(OpRecord::Kind kind, int mode, int64_t axis, std::initializer_list<cudnnBackendDescriptor_t> in,
              cudnnBackendDescriptor_t out);

  const CudnnApi& api_;
  std::vector<TensorRecord> tensor_records_;
  std::vector<cudnnBackendDescriptor_t> tensor_descs_;  // tensor_records_[i]'s descriptor
  std::vector<OpRecord> op_records_;
  std::vector<Desc> keep_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  cudnnBackendDescriptor_t graph_ = nullptr;  // once finalized (owned through keep_)
  std::string error_;
};

// Runs `plan` on the handle's stream with the tensors `uids` at `pointers` (host pointers for
// by-value tensors). Empty on success, else cuDNN's message.
std::string execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids,
                    const std::vector<void*>& pointers, void* workspace);

}  // namespace lansbert::cuda::dnn

#endif  // LANSBERT_HAVE_CUDNN
