// Sizes for people: "187566 bytes", "346.8 MB", "4.03 GB" (decimal units, as disks and
// df -H count them).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lansbert {

inline std::string byte_text(uint64_t b) {
  char buf[40];
  if (b < 1000000) std::snprintf(buf, sizeof buf, "%llu bytes", (unsigned long long)b);
  else if (b < 1000000000) std::snprintf(buf, sizeof buf, "%.1f MB", double(b) / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f GB", double(b) / 1e9);
  return buf;
}

}  // namespace lansbert
