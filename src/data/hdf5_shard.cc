// Hdf5ShardReader: the HDF5 C API behind NVIDIA's schema. HDF5's own error printing is
// switched off; every failure becomes a Status naming the file and the dataset.
#include "lansbert/data/hdf5_shard.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <cstring>

#include "lansbert/core/check.h"

namespace lansbert {
namespace {

// RAII for an hid_t with its matching close function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void quiet_hdf5() {
  static const bool once = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)once;
}

// Reads the shape of `name` into dims; checks rank and integer type.
Status dataset_shape(hid_t file, const std::string& path, const char* name, int rank,
                     hsize_t dims[2]) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) {
    return Status::corrupt(fmt::format("{}: no dataset '{}' (NVIDIA's schema needs input_ids, "
                                       "input_mask, segment_ids, masked_lm_positions, "
                                       "masked_lm_ids, next_sentence_labels)", path, name));
  }
  Handle ds(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  Handle space(ds.ok() ? H5Dget_space(ds.get()) : -1, H5Sclose);
  Handle type(ds.ok() ? H5Dget_type(ds.get()) : -1, H5Tclose);
  if (!space.ok() || !type.ok()) return Status::corrupt(fmt::format("{}: cannot open dataset '{}'", path, name));
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    return Status::corrupt(fmt::format("{}: dataset '{}' is not of an integer type", path, name));
  }
  const int r = H5Sget_simple_extent_ndims(space.get());
  if (r != rank) {
    return Status::corrupt(fmt::format("{}: dataset '{}' has rank {}, expected {}", path, name, r, rank));
  }
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  return Status::ok();
}

template <typename T>
Status read_all(hid_t file, const std::string& path, const char* name, hid_t mem_type, size_t n,
                std::vector<T>* out) {
  Handle ds(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  out->resize(n);
  if (!ds.ok() || H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data()) < 0) {
    return Status::corrupt(fmt::format("{}: reading dataset '{}' failed (damaged or truncated "
                                       "file?)", path, name));
  }
  return Status::ok();
}

}  // namespace

Status Hdf5ShardReader::open(const std::string& path, std::unique_ptr<Hdf5ShardReader>* out) {
  quiet_hdf5();
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return Status::corrupt(fmt::format("{}: not an HDF5 file", path));
  }
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return Status::corrupt(fmt::format("{}: HDF5 open failed", path));
  hsize_t ids[2], mask[2], seg[2], pos[2], mid[2], nsp[2];
  LB_RETURN_IF_ERROR(dataset_shape(file.get(), path, "input_ids", 2, ids));
  LB_RETURN_IF_ERROR(dataset_shape(file.get(), path, "input_mask", 2, mask));
  LB_RETURN_IF_ERROR(dataset_shape(file.get(), path, "segment_ids", 2, seg));
  LB_RETURN_IF_ERROR(dataset_shape(file.get(), path, "masked_lm_positions", 2, pos));
  LB_RETURN_IF_ERROR(dataset_shape(file.get(), path, "masked_lm_ids", 2, mid));
  LB_RETURN_IF_ERROR(dataset_shape(file.get(), path, "next_sentence_labels", 1, nsp));
  const hsize_t n = ids[0];
  if (mask[0] != n || seg[0] != n || pos[0] != n || mid[0] != n || nsp[0] != n ||
      mask[1] != ids[1] || seg[1] != ids[1] || mid[1] != pos[1]) {
    return Status::corrupt(fmt::format(
        "{}: inconsistent shapes: input_ids [{},{}], input_mask [{},{}], segment_ids [{},{}], "
        "masked_lm_positions [{},{}], masked_lm_ids [{},{}], next_sentence_labels [{}]", path,
        ids[0], ids[1], mask[0], mask[1], seg[0], seg[1], pos[0], pos[1], mid[0], mid[1], nsp[0]));
  }
  if (!shard_shape_ok(ids[1], pos[1])) {
    return Status::corrupt(fmt::format("{}: unusable shape: seq len {}, max pred {}", path, ids[1], pos[1]));
  }
  std::unique_ptr<Hdf5ShardReader> r(new Hdf5ShardReader());
  r->path_ = path;
  r->count_ = static_cast<int64_t>(n);
  r->seq_len_ = static_cast<int>(ids[1]);
  r->max_pred_ = static_cast<int>(pos[1]);
  *out = std::move(r);
  return Status::ok();
}

Status Hdf5ShardReader::load() {
  quiet_hdf5();
  Handle file(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return Status::io_error(fmt::format("{}: HDF5 open failed", path_));
  const size_t ns = size_t(count_) * seq_len_, np = size_t(count_) * max_pred_;
  const hid_t f = file.get();
  LB_RETURN_IF_ERROR(read_all(f, path_, "input_ids", H5T_NATIVE_INT32, ns, &input_ids_));
  LB_RETURN_IF_ERROR(read_all(f, path_, "input_mask", H5T_NATIVE_INT8, ns, &input_mask_));
  LB_RETURN_IF_ERROR(read_all(f, path_, "segment_ids", H5T_NATIVE_INT8, ns, &segment_ids_));
  LB_RETURN_IF_ERROR(read_all(f, path_, "masked_lm_positions", H5T_NATIVE_INT32, np, &positions_));
  LB_RETURN_IF_ERROR(read_all(f, path_, "masked_lm_ids", H5T_NATIVE_INT32, np, &masked_ids_));
  LB_RETURN_IF_ERROR(read_all(f, path_, "next_sentence_labels", H5T_NATIVE_INT8, size_t(count_), &nsp_));
  loaded_ = true;
  return Status::ok();
}

void Hdf5ShardReader::release() {
  loaded_ = false;
  for (auto* v : {&input_ids_, &positions_, &masked_ids_}) std::vector<int32_t>().swap(*v);
  for (auto* v : {&input_mask_, &segment_ids_, &nsp_}) std::vector<int8_t>().swap(*v);
}

Status Hdf5ShardReader::read(int64_t index, Batch* batch, int row) {
  LB_CHECK(index >= 0 && index < count_);
  LB_CHECK(batch->seq_len == seq_len_ && batch->max_pred == max_pred_ && row >= 0 && row < batch->batch);
  if (!loaded_) LB_RETURN_IF_ERROR(load());
  const int S = seq_len_, P = max_pred_;
  const size_t s0 = size_t(index) * S, p0 = size_t(index) * P, r0 = size_t(row) * S, q0 = size_t(row) * P;
  std::memcpy(batch->input_ids.data() + r0, input_ids_.data() + s0, 4 * size_t(S));
  for (int i = 0; i < S; ++i) {
    // 1 or 0: the attention reads other values as packed sequence numbers (kernels/softmax.h).
    if (input_mask_[s0 + i] != 0 && input_mask_[s0 + i] != 1)
      return Status::corrupt(fmt::format("{}: sample {}: input_mask[{}] = {} is neither 0 nor 1", path_, index, i,
                                         int(input_mask_[s0 + i])));
    batch->input_mask[r0 + i] = input_mask_[s0 + i];
    batch->segment_ids[r0 + i] = segment_ids_[s0 + i];
  }
  // Position 0 is [CLS], never masked: the first 0 ends the list of masked positions.
  bool ended = false;
  for (int k = 0; k < P; ++k) {
    const int32_t p = positions_[p0 + k];
    ended = ended || p == 0;
    if (!ended && (p < 0 || p >= S)) {
      return Status::corrupt(fmt::format("{}: sample {}: masked_lm_positions[{}] = {} is outside "
                                         "[0, {})", path_, index, k, p, S));
    }
    batch->masked_positions[q0 + k] = ended ? 0 : p;
    batch->masked_ids[q0 + k] = ended ? Batch::kIgnore : masked_ids_[p0 + k];
  }
  batch->nsp_labels[row] = nsp_[index];
  return Status::ok();
}

}  // namespace lansbert
