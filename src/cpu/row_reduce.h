// Row reductions for the CPU kernels in a fixed order that the compiler can vectorise: lane l
// of kReduceLanes takes elements l, l + kReduceLanes, ... in order, and the lanes are combined in lane
// order at the end. One running sum (or maximum) over a row is a chain the compiler may not
// reorder without -ffast-math, so it runs one element at a time, and so does everything
// computed inside it (the exp of a softmax or a cross-entropy); in lanes it runs 8 wide with
// AVX2. The order depends only on the row length, never on threads, so results stay
// reproducible; it differs from the CUDA kernels' block trees as the old sequential order did.
#pragma once

namespace lansbert::cpu {

constexpr int kReduceLanes = 16;

// max over j < n of f(j). REQUIRES: n >= 1.
template <typename T, typename F>
T row_max_of(int n, F&& f) {
  T lane[kReduceLanes];
  for (int l = 0; l < kReduceLanes; ++l) lane[l] = f(0);
  int j = 0;
  for (; j + kReduceLanes <= n; j += kReduceLanes)
    for (int l = 0; l < kReduceLanes; ++l) {
      const T v = f(j + l);
      lane[l] = v > lane[l] ? v : lane[l];
    }
  for (; j < n; ++j) {
    const T v = f(j);
    lane[0] = v > lane[0] ? v : lane[0];
  }
  T m = lane[0];
  for (int l = 1; l < kReduceLanes; ++l) m = lane[l] > m ? lane[l] : m;
  return m;
}

// max over j < n of x[j]. REQUIRES: n >= 1.
template <typename T>
T row_max(const T* x, int n) {
  return row_max_of<T>(n, [x](int j) { return x[j]; });
}

// sum over j < n of f(j).
template <typename T, typename F>
T row_sum(int n, F&& f) {
  T lane[kReduceLanes] = {};
  int j = 0;
  for (; j + kReduceLanes <= n; j += kReduceLanes)
    for (int l = 0; l < kReduceLanes; ++l) lane[l] += f(j + l);
  for (; j < n; ++j) lane[j % kReduceLanes] += f(j);
  T s = 0;
  for (int l = 0; l < kReduceLanes; ++l) s += lane[l];
  return s;
}

}  // namespace lansbert::cpu
