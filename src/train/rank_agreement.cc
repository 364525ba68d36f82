// check_same_as_rank0 and json_differences (rank_agreement.h).
#include "lansbert/train/rank_agreement.h"

#include <cstdint>
#include <map>

#include "lansbert/train/device_ranks.h"

namespace lansbert {

namespace {
// Every leaf of `j` under `path`, its value as compact JSON.
void flatten(const nlohmann::json& j, const std::string& path, std::map<std::string, std::string>* out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
  } else if (j.is_array() && !j.empty()) {
    for (size_t i = 0; i < j.size(); ++i) flatten(j[i], path + "[" + std::to_string(i) + "]", out);
  } else {
    (*out)[path] = j.dump();
  }
}
}  // namespace

std::vector<std::string> json_differences(const nlohmann::json& mine, const nlohmann::json& theirs, size_t limit) {
  std::map<std::string, std::string> a, b;
  flatten(mine, "", &a);
  flatten(theirs, "", &b);
  for (const auto& [path, value] : b) a.emplace(path, "absent");  // keys only rank 0 has
  std::vector<std::string> out;
  for (const auto& [path, value] : a) {
    const auto it = b.find(path);
    const std::string other = it == b.end() ? "absent" : it->second;
    if (value == other) continue;
    if (out.size() == limit) break;
    out.push_back(path + " is " + value + " here, " + other + " on rank 0");
  }
  return out;
}

void broadcast_text(Communicator& comm, std::string* text) {
  uint64_t bytes = text->size();
  comm.broadcast(&bytes, sizeof bytes, 0);
  if (comm.rank() != 0) text->assign(bytes, '\0');
  comm.broadcast(text->data(), bytes, 0);
}

Status check_same_as_rank0(Communicator& comm, const nlohmann::json& mine, const std::string& what,
                           const std::string& fix) {
  if (comm.world() == 1) return Status::ok();
  const std::string text = mine.dump();
  std::string theirs = text;
  broadcast_text(comm, &theirs);
  Status st;
  if (theirs != text) {
    const auto parsed = nlohmann::json::parse(theirs, nullptr, /*allow_exceptions=*/false);
    std::string list;
    for (const std::string& d : json_differences(mine, parsed, 4)) list += (list.empty() ? "" : "; ") + d;
    st = Status::invalid_argument("rank " + std::to_string(comm.rank()) + " (host " + comm.hostname() + "): " + what +
                                  " not as on rank 0: " + (list.empty() ? "the texts differ" : list) + " (" + fix +
                                  ")");
  }
  return agree_across_ranks(comm, st, "checking that every rank has rank 0's " + what, &Status::invalid_argument);
}

}  // namespace lansbert
