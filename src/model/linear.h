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
// linear_forward whose y is read only by GEMMs until dropped: produced kept (Ops::gemm_bias_kept).
template <typename T>
void linear_forward_kept(Ops<T>& ops, const T* x, const T* w, const T* b, T* y, int n, int in, int out) {
  ops.gemm_bias_kept(Trans::kNo, Trans::kYes, n, out, in, x, in, w, in, b, y, out);
}

// How linear_backward treats its gradients:
//   accumulate_dx  dx += dy W instead of =;
//   dy_kept        a *_kept op produced dy with its 16-bit copy: only dropped here, and the
//                  bias sums read that copy where dy's fp32 may be unwritten
//                  (Ops::bias_add_backward_of_kept);
//   dx_kept        dx is read only by GEMMs until its reader drops it: produced kept
//                  (Ops::gemm_kept, fp32 maybe unwritten). With accumulate_dx: dx is held
//                  only as its kept copy, which dy W is added into (Ops::gemm_accumulate_kept:
//                  the 16-bit gradient stream).
struct LinearGradFlags {
  bool accumulate_dx = false;
  bool dy_kept = false;
  bool dx_kept = false;
};

// dx[n, in] = dy W (skipped when dx is null); dW[out, in] += dy^T x; db[out] += sum over rows
// of dy (skipped when db is null: a fused backward epilogue already added it; db is not used
// to deduce T, so nullptr may be passed). dy is held across both GEMMs: 16-bit GEMMs read its
// copy, written by the bias-gradient sums (Ops::bias_add_backward_kept) or by dy's producer
// (flags.dy_kept), or cast once where there is no bias.
template <typename T>
void linear_backward(Ops<T>& ops, const T* dy, const T* x, const T* w, T* dx, T* dw, std::type_identity_t<T>* db, int n,
                     int in, int out, LinearGradFlags flags = {}) {
  // Where dy has no copy yet, the bias-gradient sums run first and write it as they read dy.
  const bool sums_keep = db && !flags.dy_kept;
  if (sums_keep) ops.bias_add_backward_kept(dy, db, n, out);
  HeldGemmOperand<T> held(ops, dy, size_t(n) * size_t(out), flags.dy_kept || sums_keep);
  if (dx && flags.dx_kept && flags.accumulate_dx)
    ops.gemm_accumulate_kept(Trans::kNo, Trans::kNo, n, in, out, dy, out, w, in, dx, in);
  else if (dx && flags.dx_kept)
    ops.gemm_kept(Trans::kNo, Trans::kNo, n, in, out, dy, out, w, in, dx, in);
  else if (dx)
    ops.gemm(Trans::kNo, Trans::kNo, n, in, out, T(1), dy, out, w, in, flags.accumulate_dx ? T(1) : T(0), dx, in);
  ops.gemm(Trans::kYes, Trans::kNo, out, in, n, T(1), dy, out, x, in, T(1), dw, in);
  if (db && flags.dy_kept) ops.bias_add_backward_of_kept(dy, db, n, out);
}

}  // namespace lansbert
