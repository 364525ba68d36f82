// drop_in_order: prep's filters (--dedup, --near-dedup) remove documents from a block in
// place, deciding in input order (a decision may depend on the ones before it: the first of
// a group of copies is the one kept). Private to src/data.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "lansbert/data/instances.h"

namespace lansbert {

// Calls drop(d, doc) once for each document, in order, and removes those it returns true
// for, keeping the order of the rest; returns how many went.
template <class Drop>
int64_t drop_in_order(std::vector<Document>* docs, Drop&& drop) {
  size_t kept = 0;
  for (size_t d = 0; d < docs->size(); ++d) {
    if (drop(d, std::as_const((*docs)[d]))) continue;
    if (kept != d) (*docs)[kept] = std::move((*docs)[d]);
    ++kept;
  }
  const auto dropped = static_cast<int64_t>(docs->size() - kept);
  docs->resize(kept);
  return dropped;
}

}  // namespace lansbert
