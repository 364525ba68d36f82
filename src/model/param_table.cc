// ParamTable bookkeeping: aligned offsets, lookups, and the role policies.
#include "lansbert/model/param_table.h"

#include "lansbert/core/check.h"

namespace lansbert {

const char* param_role_name(ParamRole r) {
  switch (r) {
    case ParamRole::kWeight: return "weight";
    case ParamRole::kEmbedding: return "embedding";
    case ParamRole::kBias: return "bias";
    case ParamRole::kLayerNormGamma: return "layernorm_gamma";
    case ParamRole::kLayerNormBeta: return "layernorm_beta";
  }
  return "?";
}

const ParamEntry& ParamTable::add(std::string name, std::vector<int64_t> shape, ParamRole role) {
  return append(std::move(name), std::move(shape), role, (total_ + kAlign - 1) / kAlign * kAlign);
}

const ParamEntry& ParamTable::add_packed(std::string name, std::vector<int64_t> shape, ParamRole role) {
  LB_CHECK_MSG(!entries_.empty(), "add_packed: " + name + " has no tensor to follow");
  return append(std::move(name), std::move(shape), role, total_);
}

const ParamEntry& ParamTable::append(std::string name, std::vector<int64_t> shape, ParamRole role,
                                     size_t offset) {
  LB_CHECK_MSG(by_name_.emplace(name, entries_.size()).second, "duplicate parameter " + name);
  ParamEntry e;
  e.name = std::move(name);
  e.numel = 1;
  for (int64_t d : shape) {
    LB_CHECK(d > 0);
    e.numel *= static_cast<size_t>(d);
  }
  e.shape = std::move(shape);
  e.role = role;
  e.offset = offset;
  total_ = e.offset + e.numel;
  entries_.push_back(std::move(e));
  return entries_.back();
}

size_t ParamTable::parameter_count() const {
  size_t n = 0;
  for (const auto& e : entries_) n += e.numel;
  return n;
}

const ParamEntry* ParamTable::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

}  // namespace lansbert
