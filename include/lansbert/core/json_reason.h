// The reason an nlohmann::json exception gives, for an error message of ours that names the
// file and line itself: its what() without the "[json.exception.out_of_range.406] " tag.
#pragma once

#include <exception>
#include <string>

namespace lansbert {

inline std::string json_reason(const std::exception& e) {
  const std::string what = e.what();
  const size_t tag_end = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos ? what.substr(tag_end + 2) : what;
}

}  // namespace lansbert
