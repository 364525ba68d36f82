// ParamTable: every parameter tensor of the model as a row (Hugging Face name, shape,
// role, offset into the flat buffers). All parameters live in one contiguous buffer, the
// gradients in a second with the same layout, the optimizer moments in two more; the
// table is how the optimizer finds its blocks, how checkpoints name tensors, and how one
// all-reduce covers every gradient.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace lansbert {

// What a tensor is for. Weight decay and trust-ratio policies are decided by role, never by
// matching substrings of names.
enum class ParamRole {
  kWeight,          // dense layer weight [out, in]
  kEmbedding,       // embedding table [rows, hidden]
  kBias,            // any bias vector
  kLayerNormGamma,  // LayerNorm scale
  kLayerNormBeta,   // LayerNorm shift
};

const char* param_role_name(ParamRole r);

struct ParamEntry {
  std::string name;            // Hugging Face BertForPreTraining key
  std::vector<int64_t> shape;  // row-major, weights as [out, in]
  size_t offset = 0;           // first element in the flat buffer
  size_t numel = 0;            // product of shape
  ParamRole role = ParamRole::kWeight;
};

class ParamTable {
 public:
  // Appends a tensor. Offsets are aligned to kAlign elements so every block starts on a
  // 256-byte boundary in fp32; the gaps are zero in every flat buffer and never updated.
  const ParamEntry& add(std::string name, std::vector<int64_t> shape, ParamRole role);
  // Appends a tensor right after the previous one, with no gap, so that tensors added this
  // way after an aligned one form one contiguous block a single GEMM can read (BERT's query,
  // key and value weights as one [3H, H] matrix, their biases as one [3H] vector).
  const ParamEntry& add_packed(std::string name, std::vector<int64_t> shape, ParamRole role);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  const ParamEntry& operator[](size_t i) const { return entries_[i]; }
  // Elements of the flat buffer, gaps included.
  size_t total_elements() const { return total_; }
  // Sum of numel over entries: the parameter count a user is told.
  size_t parameter_count() const;
  // Returns the entry with this name, or nullptr.
  const ParamEntry* find(const std::string& name) const;

  static constexpr size_t kAlign = 64;

 private:
  const ParamEntry& append(std::string name, std::vector<int64_t> shape, ParamRole role, size_t offset);

  std::vector<ParamEntry> entries_;
  std::unordered_map<std::string, size_t> by_name_;  // entries_ index: find() and the duplicate check in O(1)
  size_t total_ = 0;
};

}  // namespace lansbert
