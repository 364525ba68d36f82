// Canonical ordering, the last step of NFD (Unicode 15, section 3.11): in each maximal run
// of code points whose canonical combining class is not 0, a stable sort by that class.
// Inserting each mark into place, as WordScanner once did, costs the run's length per
// mark: quadratic on one long line of stacked marks (80k marks took 3 s). Real text has
// runs of one to a few marks, sorted here by insertion without allocating; a longer run
// goes to std::stable_sort, O(r log r).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace lansbert {

// ccc_of(cp) returns the combining class of cp (0 for starters). It is called once for each
// code point, plus twice per comparison inside a run of two or more non-starters.
template <class CccOf>
void canonical_order(int32_t* cps, size_t n, CccOf&& ccc_of) {
  constexpr size_t kInsertionMax = 8;
  const auto by_class = [&](int32_t x, int32_t y) { return ccc_of(x) < ccc_of(y); };
  size_t i = 0;
  while (i < n) {
    if (ccc_of(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < n && ccc_of(cps[end]) != 0) ++end;  // the run is [i, end)
    if (end - i <= kInsertionMax) {
      for (size_t k = i + 1; k < end; ++k) {
        const int32_t cp = cps[k];
        size_t at = k;
        while (at > i && by_class(cp, cps[at - 1])) {
          cps[at] = cps[at - 1];
          --at;
        }
        cps[at] = cp;
      }
    } else {
      std::stable_sort(cps + i, cps + end, by_class);
    }
    i = end + 1;  // cps[end] is a starter, already looked up (or the end)
  }
}

}  // namespace lansbert
