// Dense (fully connected) layer as a forward/backward pair over Ops<T> GEMMs, with
// Hugging Face's weight layout [out, in]:  y[n, out] = x[n, in] W^T + b.
#pragma once

#include <type_traits>

#include "lansbert/backend/ops.h"

namespace lansbert {

// y = x W^T only: for layers whose bias goes into a fused epilogue (Ops::bias_gelu_forward,
// Ops::bias_dropout_residual_forward).
template <typename T>
void linear_gemm(Ops<T>& ops, const T* x, const T* w, T* y, int n, int in, int out) {
  ops.gemm(Trans::kNo, Trans::kYes, n, out, in, T(1), x, in, w, in, T(0), y, out);
}

// y = x W^T + b in one Ops call (the bias in the GEMM's epilogue where the backend has one).
template <typename T>
void linear_forward(Ops<T>& ops, const T* x, const T* w, const T* b, T* y, int n, int in, int out) {
  ops.gemm_bias(Trans::kNo, Trans::kYes, n, out, in, x, in, w, in, b, y, out);
}

// dx[n, in] = dy W (written, or added when accumulate_dx; skipped when dx is null);
// dW[out, in] += dy^T x; db[out] += sum over rows of dy (skipped when db is null: a fused
// backward epilogue already added it; db is not used to deduce T, so nullptr may be passed).
// dy is held across both GEMMs: 16-bit GEMMs convert it once, or not at all when dy_kept
// (a *_kept op produced it with its 16-bit copy; it is dropped here).
template <typename T>
void linear_backward(Ops<T>& ops, const T* dy, const T* x, const T* w, T* dx, T* dw, std::type_identity_t<T>* db, int n,
                     int in, int out, bool accumulate_dx = false, bool dy_kept = false) {
  HeldGemmOperand<T> held(ops, dy, size_t(n) * size_t(out), dy_kept);
  if (dx) ops.gemm(Trans::kNo, Trans::kNo, n, in, out, T(1), dy, out, w, in, accumulate_dx ? T(1) : T(0), dx, in);
  ops.gemm(Trans::kYes, Trans::kNo, out, in, n, T(1), dy, out, x, in, T(1), dw, in);
  if (db) ops.bias_add_backward(dy, db, n, out);
}

}  // namespace lansbert
