// Softmax cross-entropy on the CPU: one task per row of logits.
#include "cpu_ops_impl.h"
#include "lansbert/kernels/cross_entropy.h"

namespace lansbert::cpu {

template <typename T>
void CpuOps<T>::cross_entropy_forward(const T* logits, const int32_t* labels, T* losses,
                                      int32_t* correct, int rows, int classes) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * classes))
  for (int r = 0; r < rows; ++r) {
    auto row = kern::cross_entropy_row(logits + size_t(r) * classes, classes, labels[r]);
    losses[r] = row.loss;
    correct[r] = labels[r] >= 0 && row.argmax == labels[r];
  }
}

template <typename T>
void CpuOps<T>::cross_entropy_backward(const T* logits, const int32_t* labels, T* dlogits,
                                       int rows, int classes, T weight) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * classes))
  for (int r = 0; r < rows; ++r) {
    const T* x = logits + size_t(r) * classes;
    T* dx = dlogits + size_t(r) * classes;
    if (labels[r] < 0) {
      for (int j = 0; j < classes; ++j) dx[j] = T(0);
      continue;
    }
    // One exp per element: keep exp(x - max) in dx, then scale it in place.
    T mx = x[0];
    for (int j = 1; j < classes; ++j) mx = x[j] > mx ? x[j] : mx;
    T sum = 0;
    for (int j = 0; j < classes; ++j) {
      dx[j] = kern::lb_exp(x[j] - mx);
      sum += dx[j];
    }
    for (int j = 0; j < classes; ++j) dx[j] = kern::cross_entropy_dx_from_exp(dx[j], j, labels[r], sum, weight);
  }
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
