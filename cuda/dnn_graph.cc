// cuDNN backend API plumbing (dnn_graph.h): descriptors, operations, plan search, execute.
#include "dnn_graph.h"

#if LANSBERT_HAVE_CUDNN

namespace lansbert::cuda::dnn {

Desc& Desc::operator=(Desc&& o) noexcept {
  if (this != &o) {
    if (d_) cudnn_api().BackendDestroyDescriptor(d_);
    d_ = o.d_;
    o.d_ = nullptr;
  }
  return *this;
}

Desc::~Desc() {
  if (d_) cudnn_api().BackendDestroyDescriptor(d_);
}

GraphBuilder::GraphBuilder() : api_(cudnn_api()) {
  if (!api_.ok()) error_ = api_.error;
}

void GraphBuilder::fail(const std::string& what) {
  if (error_.empty()) error_ = what;
}

cudnnBackendDescriptor_t GraphBuilder::make(cudnnBackendDescriptorType_t type, const char* what) {
  if (!ok()) return nullptr;
  cudnnBackendDescriptor_t d = nullptr;
  const cudnnStatus_t st = api_.BackendCreateDescriptor(type, &d);
  if (st != CUDNN_STATUS_SUCCESS) {
    fail(std::string("create ") + what + ": " + api_.describe(st));
    return nullptr;
  }
  keep_.emplace_back(d);
  return d;
}

void GraphBuilder::set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                       cudnnBackendAttributeType_t type, int64_t count, const void* values, const char* what) {
  if (!ok()) return;
  const cudnnStatus_t st = api_.BackendSetAttribute(d, name, type, count, values);
  if (st != CUDNN_STATUS_SUCCESS)
    fail(std::string(what) + ": attribute " + std::to_string(int(name)) + ": " + api_.describe(st));
}

void GraphBuilder::finalize(cudnnBackendDescriptor_t d, const char* what) {
  if (!ok()) return;
  const cudnnStatus_t st = api_.BackendFinalize(d);
  if (st != CUDNN_STATUS_SUCCESS) fail(std::string("finalize ") + what + ": " + api_.describe(st));
}

cudnnBackendDescriptor_t GraphBuilder::tensor(int64_t uid, cudnnDataType_t type, const Dims& dims,
                                              const Dims& strides, bool is_virtual, bool by_value) {
  cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
  // What every buffer here guarantees: allocations are 256-byte aligned, but the bf16 staging
  // slices sit B*S*ld*2 bytes apart, a multiple of 16 only (ld is a multiple of 8).
  const int64_t alignment = 16;
  const bool virt = is_virtual;
  set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor");
  set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "tensor");
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "tensor");
  set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor");
  set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, "tensor");
  set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor");
  if (by_value) {
    const bool yes = true;
    set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, "tensor");
  }
  const std::string what = "tensor " + std::to_string(uid);
  finalize(t, what.c_str());
  if (ok()) {
    tensor_records_.push_back({uid, type, dims, strides, is_virtual, by_value});
    tensor_descs_.push_back(t);
  }
  return t;
}

int64_t GraphBuilder::uid_of(cudnnBackendDescriptor_t t) const {
  for (size_t i = 0; t && i < tensor_descs_.size(); ++i)
    if (tensor_descs_[i] == t) return tensor_records_[i].uid;
  return -1;
}

void GraphBuilder::record(OpRecord::Kind kind, int mode, int64_t axis,
                          std::initializer_list<cudnnBackendDescriptor_t> in, cudnnBackendDescriptor_t out) {
  if (!ok()) return;
  OpRecord r;
  r.kind = kind;
  r.mode = mode;
  r.axis = axis;
  for (cudnnBackendDescriptor_t t : in) r.in.push_back(uid_of(t));
  r.out = uid_of(out);
  op_records_.push_back(std::move(r));
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                             cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, cudnnDataType_t math,
                             int64_t axis) {
  const std::string what = "pointwise mode " + std::to_string(int(mode));
  cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what.c_str());
  set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what.c_str());
  set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math, what.c_str());
  if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what.c_str());
  finalize(pw, what.c_str());
  cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what.c_str());
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, what.c_str());
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what.c_str());
  if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what.c_str());
  if (t) set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, what.c_str());
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what.c_str());
  finalize(op, what.c_str());
  if (ok()) ops_.push_back(op);
  record(OpRecord::Kind::kPointwise, int(mode), axis, {x, b, t}, y);
}

void GraphBuilder::reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  const char* what = "reduction";
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
  set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, what);
  set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &math, what);
  finalize(r, what);
  cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r, what);
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
  finalize(op, what);
  if (ok()) ops_.push_back(op);
  record(OpRecord::Kind::kReduction, int(mode), -1, {x}, y);
}

void GraphBuilder::matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                          cudnnBackendDescriptor_t m_override, cudnnBackendDescriptor_t n_override,
                          cudnnBackendDescriptor_t k_override) {
  const char* what = "matmul";
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
  set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &math, what);
  finalize(mm, what);
  cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, what);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, what);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, what);
  if (m_override)
    set(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m_override, what);
  if (n_override)
    set(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n_override, what);
  if (k_override)
    set(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k_override, what);
  finalize(op, what);
  if (ok()) ops_.push_back(op);
  record(OpRecord::Kind::kMatmul, -1, -1, {a, b, m_override, n_override, k_override}, c);
}

void GraphBuilder::reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  add_operation(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
                {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x}, {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y}}, "reshape");
  record(OpRecord::Kind::kReshape, -1, -1, {x}, y);
}

void GraphBuilder::operation(cudnnBackendDescriptorType_t type, const std::vector<Attr>& attrs, const char* what) {
  add_operation(type, attrs, what);
  record(OpRecord::Kind::kOther, int(type), -1, {}, nullptr);
}

void GraphBuilder::add_operation(cudnnBackendDescriptorType_t type, const std::vector<Attr>& attrs,
                                 const char* what) {
  cudnnBackendDescriptor_t op = make(type, what);
  for (const Attr& a : attrs)
    if (a.value) set(op, a.name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a.value, what);
  finalize(op, what);
  if (ok()) ops_.push_back(op);
}

bool GraphBuilder::finalize_graph(cudnnHandle_t handle) {
  if (!ok()) return false;
  if (graph_) return true;
  cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  // The handle attribute is marked deprecated in 9.x headers but every 9.x release takes it
  // (the device-property alternative needs 9.8). Without one (tests on a machine without a
  // GPU) the graph is still checked as a DAG of compatible tensors.
  if (handle) set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "operation graph");
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops_.size()), ops_.data(),
      "operation graph");
  finalize(graph, "operation graph");
  if (ok()) graph_ = graph;
  return ok();
}

bool GraphBuilder::build_plan(cudnnHandle_t handle, Plan* out) {
  if (!finalize_graph(handle)) return false;
  std::string tried;
  if (try_heuristics(handle, graph_, CUDNN_HEUR_MODE_A, "A", out, &tried) ||
      try_heuristics(handle, graph_, CUDNN_HEUR_MODE_FALLBACK, "fallback", out, &tried))
    return true;
  fail("no engine for this graph (" + tried + ")");
  return false;
}

bool GraphBuilder::try_heuristics(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                                  cudnnBackendHeurMode_t mode, const char* mode_name, Plan* out,
                                  std::string* tried) {
  // Errors here are per engine: collected into `tried`, not recorded as the builder's error.
  auto note = [&](const std::string& s) { *tried += (tried->empty() ? "" : "; ") + std::string(mode_name) + ": " + s; };
  cudnnBackendDescriptor_t heur = nullptr;
  cudnnStatus_t st = api_.BackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
  if (st != CUDNN_STATUS_SUCCESS) {
    note(api_.describe(st));
    return false;
  }
  Desc heur_owned(heur);
  st = api_.BackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                &graph);
  if (st == CUDNN_STATUS_SUCCESS)
    st = api_.BackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (st == CUDNN_STATUS_SUCCESS) st = api_.BackendFinalize(heur);
  int64_t count = 0;
  if (st == CUDNN_STATUS_SUCCESS)
    st = api_.BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                  nullptr);
  if (st != CUDNN_STATUS_SUCCESS) {
    note("heuristics: " + api_.describe(st));
    return false;
  }
  if (count == 0) {
    note("no engine configs");
    return false;
  }
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw(size_t(count), nullptr);
  for (auto& r : raw) {
    if (api_.BackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &r) != CUDNN_STATUS_SUCCESS) {
      note("cannot create engine configs");
      return false;
    }
    cfgs.emplace_back(r);
  }
  int64_t got = 0;
  st = api_.BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                raw.data());
  if (st != CUDNN_STATUS_SUCCESS) {
    note("heuristics results: " + api_.describe(st));
    return false;
  }
  for (int64_t i = 0; i < got; ++i) {
    cudnnBackendDescriptor_t plan = nullptr;
    if (api_.BackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS) continue;
    Desc plan_owned(plan);
    st = api_.BackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (st == CUDNN_STATUS_SUCCESS)
      st = api_.BackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &raw[size_t(i)]);
    if (st == CUDNN_STATUS_SUCCESS) st = api_.BackendFinalize(plan);
    if (st != CUDNN_STATUS_SUCCESS) {
      note("config " + std::to_string(i) + ": " + api_.describe(st));
      continue;
    }
    int64_t ws = 0, n = 0;
    st = api_.BackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
    if (st != CUDNN_STATUS_SUCCESS) {
      note("config " + std::to_string(i) + " workspace: " + api_.describe(st));
      continue;
    }
    out->keep = std::move(keep_);
    for (Desc& c : cfgs) out->keep.push_back(std::move(c));
    out->keep.push_back(std::move(heur_owned));
    out->plan = std::move(plan_owned);
    out->workspace = ws;
    out->engine = "engine config " + std::to_string(i) + " of " + std::to_string(got) + " (heuristics " +
                  mode_name + ")";
    keep_.clear();
    ops_.clear();
    graph_ = nullptr;
    return true;
  }
  note(std::to_string(got) + " configs, none finalized");
  return false;
}

std::string execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids,
                    const std::vector<void*>& pointers, void* workspace) {
  const CudnnApi& api = cudnn_api();
  cudnnBackendDescriptor_t pack = nullptr;
  cudnnStatus_t st = api.BackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (st != CUDNN_STATUS_SUCCESS) return "variant pack: " + api.describe(st);
  Desc owned(pack);
  const int64_t n = int64_t(uids.size());
  st = api.BackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, pointers.data());
  if (st == CUDNN_STATUS_SUCCESS)
    st = api.BackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data());
  if (st == CUDNN_STATUS_SUCCESS)
    st = api.BackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (st == CUDNN_STATUS_SUCCESS) st = api.BackendFinalize(pack);
  if (st != CUDNN_STATUS_SUCCESS) return "variant pack: " + api.describe(st);
  st = api.BackendExecute(handle, plan.plan.get(), pack);
  if (st != CUDNN_STATUS_SUCCESS) return "execute (" + plan.engine + "): " + api.describe(st);
  return "";
}

}  // namespace lansbert::cuda::dnn

#endif  // LANSBERT_HAVE_CUDNN
