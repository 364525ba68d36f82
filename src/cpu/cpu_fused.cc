// Fused linear-layer epilogues on the CPU (ops.h): bias + GELU, bias + dropout + residual,
// and their backward passes with the bias gradient. Each computes the same expressions in
// the same order as the unfused ops (cpu_elementwise.cc), so results are bit-identical;
// what they save is passes over the activations.
#include <algorithm>

#include "cpu_ops_impl.h"
#include "lansbert/kernels/activations.h"
#include "lansbert/kernels/dropout.h"
#include "philox_lanes.h"

namespace lansbert::cpu {

template <typename T>
void CpuOps<T>::bias_gelu_forward(T* pre, const T* bias, T* act, int rows, int cols) {
  kern::with_gelu_form(this->gelu_form_, [&](auto gelu) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * cols))
    for (int r = 0; r < rows; ++r) {
      T* x = pre + size_t(r) * cols;
      T* y = act + size_t(r) * cols;
      for (int c = 0; c < cols; ++c) {
        x[c] += bias[c];
        y[c] = gelu.fwd(x[c]);
      }
    }
  });
}

// The twin of the CUDA kernel that writes the kept copy of y instead of y (ops.h).
template <typename T>
void CpuOps<T>::gelu_forward_kept(const T* x, T* y, size_t n) {
  std::vector<T>* copy = kept_output(y, n);
  if (!copy) return Ops<T>::gelu_forward_kept(x, y, n);
  gelu_forward(x, copy->data(), n);
  round_values(copy->data(), n, copy->data());
}

template <typename T>
void CpuOps<T>::bias_gelu_backward(const T* dact, const T* pre, T* dpre, T* dbias, int rows, int cols) {
  // Column blocks, rows in order: the bias sums have bias_add_backward's order.
  kern::with_gelu_form(this->gelu_form_, [&](auto gelu) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * cols))
    for (int blk = 0; blk < column_blocks(cols); ++blk) {
      int c0, c1;
      column_block(cols, blk, &c0, &c1);
      for (int r = 0; r < rows; ++r) {
        const size_t row = size_t(r) * cols;
        for (int c = c0; c < c1; ++c) {
          const T g = gelu.grad(dact[row + c], pre[row + c]);
          dpre[row + c] = g;
          dbias[c] += g;
        }
      }
    }
  });
}

template <typename T>
void CpuOps<T>::bias_dropout_residual_forward(T* y, const T* bias, const T* residual, int rows, int cols,
                                              float p, RngKey key) {
  const size_t n = size_t(rows) * cols;
  if (p <= 0.0f) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const size_t i = size_t(r) * cols + c;
        y[i] = (y[i] + bias[c]) + residual[i];
      }
    return;
  }
  // The bias first, by rows (the same additions, stored between the two steps, which rounds
  // nothing in fp32): the dropout loop then needs no column index, whose division per element
  // cost several times the rest once Philox ran in vector lanes.
  bias_add_forward(y, bias, rows, cols);
  for_each_dropout_bits(n, key, worth_threads(n), [&](size_t i, uint32_t bits) {
    y[i] = kern::dropout_scale(y[i], bits, p) + residual[i];
  });
}

template <typename T>
void CpuOps<T>::dropout_bias_backward(const T* dy, T* dx, T* dbias, int rows, int cols, float p, RngKey key) {
  // Two passes here: the vectorised mask generator wants long runs, the column sums want
  // column blocks. (The CUDA twin takes two passes too, for its own Philox reason.)
  dropout_forward(dy, dx, size_t(rows) * cols, p, key);
  bias_add_backward(dx, dbias, rows, cols);
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
