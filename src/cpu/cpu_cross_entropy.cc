// Softmax cross-entropy on the CPU: one task per row of logits, its max and sum of exps in
// vectorisable lanes (row_reduce.h).
#include "cpu_ops_impl.h"
#include "lansbert/kernels/cross_entropy.h"
#include "row_reduce.h"

namespace lansbert::cpu {

template <typename T>
void CpuOps<T>::cross_entropy_forward(const T* logits, const int32_t* labels, T* losses,
                                      int32_t* correct, int rows, int classes) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * classes))
  for (int r = 0; r < rows; ++r) {
    const T* x = logits + size_t(r) * classes;
    const T mx = row_max(x, classes);
    int argmax = 0;  // the first index of the maximum
    while (argmax < classes && !(x[argmax] == mx)) ++argmax;
    if (argmax == classes) argmax = 0;  // a NaN max equals nothing (and the loss is NaN)
    const T sum = row_sum<T>(classes, [&](int j) { return kern::lb_exp(x[j] - mx); });
    losses[r] = kern::cross_entropy_loss(x, labels[r], mx, sum);
    correct[r] = labels[r] >= 0 && argmax == labels[r];
  }
}

template <typename T>
void CpuOps<T>::cross_entropy_backward(const T* logits, const int32_t* labels, T* dlogits,
                                       int rows, int classes, T weight) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * classes))
  for (int r = 0; r < rows; ++r) {
    const T* x = logits + size_t(r) * classes;
    T* dx = dlogits + size_t(r) * classes;
    const int32_t label = labels[r];
    if (label < 0) {
      for (int j = 0; j < classes; ++j) dx[j] = T(0);
      continue;
    }
    // One exp per element: keep exp(x - max) in dx, then scale it in place.
    const T mx = row_max(x, classes);
    for (int j = 0; j < classes; ++j) dx[j] = kern::lb_exp(x[j] - mx);
    const T sum = row_sum<T>(classes, [&](int j) { return dx[j]; });
    for (int j = 0; j < classes; ++j) dx[j] = kern::cross_entropy_dx_from_exp(dx[j], j, label, sum, weight);
  }
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
