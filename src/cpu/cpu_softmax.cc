// Attention softmax on the CPU: one task per (batch, head, query) row; each row's max, sum
// and dot product in vectorisable lanes (row_reduce.h), the elements by the shared bodies.
#include <limits>

#include "cpu_ops_impl.h"
#include "lansbert/kernels/softmax.h"
#include "row_reduce.h"

namespace lansbert::cpu {

namespace {

template <typename T>
void softmax_row(const T* x, const int32_t* key_mask, int32_t query_mask, int n, T scale, T* p) {
  // Masked keys take -inf in the max; a row without unmasked keys gives zeros (inv_sum 0).
  // x is read until the exps are written: p may be x.
  const T ninf = -std::numeric_limits<T>::infinity();
  auto seen = [&](int j) { return kern::attention_visible(key_mask[j], query_mask); };
  bool any = false;
  for (int j = 0; j < n && !any; ++j) any = seen(j);
  const T mx = any ? row_max_of<T>(n, [&](int j) { return seen(j) ? scale * x[j] : ninf; }) : T(0);
  for (int j = 0; j < n; ++j) p[j] = kern::masked_softmax_exp(x[j], seen(j), scale, mx);
  const T inv = kern::masked_softmax_inv_sum(row_sum<T>(n, [&](int j) { return p[j]; }), any);
  for (int j = 0; j < n; ++j) p[j] *= inv;
}

template <typename T>
void softmax_row_backward(const T* dp, const T* p, int n, T scale, T* dx) {
  const T dot = row_sum<T>(n, [&](int j) { return dp[j] * p[j]; });
  for (int j = 0; j < n; ++j) dx[j] = kern::masked_softmax_dx(dp[j], p[j], dot, scale);
}

}  // namespace

template <typename T>
void CpuOps<T>::softmax_forward(const T* scores, const int32_t* key_mask, T* probs, int batch,
                                int heads, int seq, T scale) {
  const int64_t rows = int64_t(batch) * heads * seq;
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * seq))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (int64_t(heads) * seq);
    const int32_t* mask = key_mask + b * seq;
    softmax_row(scores + r * seq, mask, mask[r % seq], seq, scale, probs + r * seq);
  }
}

template <typename T>
void CpuOps<T>::softmax_backward(const T* dprobs, const T* probs, T* dscores, int batch,
                                 int heads, int seq, T scale) {
  const int64_t rows = int64_t(batch) * heads * seq;
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * seq))
  for (int64_t r = 0; r < rows; ++r)
    softmax_row_backward(dprobs + r * seq, probs + r * seq, seq, scale, dscores + r * seq);
}

// The CPU runs the composition (the mask generator wants long runs); the CUDA twin fuses.
template <typename T>
void CpuOps<T>::softmax_dropout_forward(const T* scores, const int32_t* key_mask, T* probs, T* probs_drop,
                                        int batch, int heads, int seq, T scale, float p, RngKey key) {
  softmax_forward(scores, key_mask, probs, batch, heads, seq, scale);
  dropout_forward(probs, probs_drop, size_t(batch) * heads * seq * seq, p, key);
}

template <typename T>
void CpuOps<T>::dropout_softmax_backward(T* dprobs_drop, const T* probs, T* dscores, int batch, int heads,
                                         int seq, T scale, float p, RngKey key) {
  dropout_backward(dprobs_drop, dprobs_drop, size_t(batch) * heads * seq * seq, p, key);
  softmax_backward(dprobs_drop, probs, dscores, batch, heads, seq, scale);
}

// The twins of the CUDA kernels that write a kept operand's 16-bit copy instead of the fp32
// tensor: the fp32 values are computed into the copy and rounded there (with the shared
// half.h bodies, as the kernels round what they write); the fp32 output is left unwritten.
template <typename T>
void CpuOps<T>::softmax_dropout_forward_kept(const T* scores, const int32_t* key_mask, T* probs, T* probs_drop,
                                             int batch, int heads, int seq, T scale, float p, RngKey key) {
  const size_t n = size_t(batch) * heads * seq * seq;
  std::vector<T>* copy = kept_output(probs_drop, n);
  if (!copy)
    return Ops<T>::softmax_dropout_forward_kept(scores, key_mask, probs, probs_drop, batch, heads, seq, scale, p, key);
  softmax_dropout_forward(scores, key_mask, probs, copy->data(), batch, heads, seq, scale, p, key);
  round_values(copy->data(), n, copy->data());
}

template <typename T>
void CpuOps<T>::softmax_backward_kept(T* dprobs, const T* probs, T* dscores, int batch, int heads, int seq, T scale,
                                      float p, RngKey key) {
  const size_t n = size_t(batch) * heads * seq * seq;
  std::vector<T>* copy = kept_output(dscores, n);
  if (!copy) return Ops<T>::softmax_backward_kept(dprobs, probs, dscores, batch, heads, seq, scale, p, key);
  if (p > 0)
    dropout_softmax_backward(dprobs, probs, copy->data(), batch, heads, seq, scale, p, key);
  else
    softmax_backward(dprobs, probs, copy->data(), batch, heads, seq, scale);
  round_values(copy->data(), n, copy->data());
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
