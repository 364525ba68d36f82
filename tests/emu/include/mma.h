// nvcuda::wmma for the CUDA emulator (docs/emulator.md): the m16n16k16 shape with __nv_bfloat16
// or __half operands and a float accumulator, enough for a tensor-core kernel to run on the
// CPU. tests/emu/include comes first on the emulator's include path, so `#include <mma.h>`
// finds this file instead of the toolkit's (whose functions are nvcc-only).
//
// How a fragment is spread over a warp's lanes is unspecified on a GPU (and differs between
// architectures); a kernel may only treat it as a whole. So here every lane's fragment holds
// the WHOLE tile (num_elements == 256), in row-major element order:
//   - load_matrix_sync reads the whole tile in every lane;
//   - mma_sync computes the whole product in every lane;
//   - store_matrix_sync writes only the calling lane's share (lane l: elements l*8 .. l*8+7
//     of the tile in row-major order), so a lane that reads what another lane stored without
//     a __syncwarp between reads the old contents (poisoned shared memory gives NaN): a race
//     on a GPU, where each lane also writes only the elements it holds;
//   - fill_fragment and element-wise access to x[] are lane-local, as on a GPU.
// load, store and mma are warp-collective on a GPU (all 32 lanes call them together, with the
// same pointer, ldm and layout), so each first joins a full-warp barrier (emu::warp_barrier,
// the mechanism of __syncwarp), which stops the run when a lane skips the call, is at a
// different one, or passes other arguments or a fragment whose contents differ from its
// neighbours' (an element-wise op that depended on the lane: the mapping is unspecified).
//
// Rounding: the products of bf16/fp16 values are exact (taken in double, so no bf16 product
// over- or underflows); the 16 products of an element are summed in double with c and rounded
// to float once. Tensor cores accumulate in fp32 in an
// order NVIDIA does not document; that order and rounding are not modelled.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "emu_device.h"

namespace nvcuda::wmma {

struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int m, int n, int k, typename T, typename Layout = void>
class fragment {
  static_assert(m == 16 && n == 16 && k == 16, "the emulator's wmma has the m16n16k16 shape only");
  static_assert(std::is_same_v<Use, accumulator>
                    ? std::is_same_v<T, float> && std::is_void_v<Layout>
                    : (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) &&
                          (std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>),
                "the emulator's wmma has bf16/fp16 matrix_a/matrix_b (row_major or col_major) and "
                "float accumulators only");

 public:
  enum { num_elements = 256, num_storage_elements = 256 };  // the whole tile, in every lane
  using element_type = T;
  using storage_element_type = T;
  storage_element_type x[num_elements];  // row-major: element (r, c) is x[r * 16 + c]
};

namespace detail {

using Acc = fragment<accumulator, 16, 16, 16, float>;

inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float widen(__half v) { return __half2float(v); }

// FNV-1a over the fragment's bytes: lanes whose fragments differ show at the barrier.
template <typename F>
uint64_t mix(uint64_t h, const F& f) {
  unsigned char bytes[sizeof f.x];
  std::memcpy(bytes, f.x, sizeof bytes);
  for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

// The checks CUDA states for these calls (cheap; on a GPU a violation is undefined), then the
// full-warp barrier. `what` is the call; `key` must agree across the warp.
inline void collective(emu::WarpOp op, const char* what, const void* p, unsigned ldm, unsigned ldm_multiple,
                       uint64_t key, int layout) {
  const dim3 bd = blockDim;
  if ((bd.x * bd.y * bd.z) % 32 != 0)
    emu::fatal_in_kernel(std::string(what) + " in a block of " + std::to_string(bd.x * bd.y * bd.z) +
                         " threads: the emulator's wmma needs whole warps (a multiple of 32)");
  if (p && reinterpret_cast<uintptr_t>(p) % 32 != 0)
    emu::fatal_in_kernel(std::string(what) + ": the pointer must be 256-bit (32-byte) aligned (declare a "
                         "__shared__ tile __align__(32))");
  if (p && ldm % ldm_multiple != 0)
    emu::fatal_in_kernel(std::string(what) + ": ldm " + std::to_string(ldm) + " is not a multiple of " +
                         std::to_string(ldm_multiple) + " elements (16 bytes)");
  emu::warp_barrier(op, 0xffffffffu, key, int(ldm << 1 | unsigned(layout)));
}

inline unsigned lane() {
  const dim3 t(threadIdx.x, threadIdx.y, threadIdx.z), bd = blockDim;
  return (t.x + bd.x * (t.y + bd.y * t.z)) % 32;
}

// Offset of tile element (r, c) in memory of the given layout.
inline size_t at(int r, int c, unsigned ldm, bool col_major) {
  return col_major ? size_t(c) * ldm + r : size_t(r) * ldm + c;
}

}  // namespace detail

template <typename Use, int m, int n, int k, typename T, typename Layout>
void fill_fragment(fragment<Use, m, n, k, T, Layout>& f, const std::type_identity_t<T>& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

// matrix_a / matrix_b: the layout is the fragment's.
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const std::type_identity_t<T>* p, unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>, "an accumulator's load_matrix_sync takes a layout_t");
  constexpr bool col = std::is_same_v<Layout, col_major>;
  detail::collective(emu::WarpOp::kWmmaLoad, "wmma::load_matrix_sync", p, ldm, 8, reinterpret_cast<uintptr_t>(p), col);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = p[detail::at(r, c, ldm, col)];
}

inline void load_matrix_sync(detail::Acc& f, const float* p, unsigned ldm, layout_t layout) {
  const bool col = layout == mem_col_major;
  detail::collective(emu::WarpOp::kWmmaLoad, "wmma::load_matrix_sync", p, ldm, 4, reinterpret_cast<uintptr_t>(p), col);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = p[detail::at(r, c, ldm, col)];
}

// Only the calling lane's 8 elements are written (see the top of the file).
inline void store_matrix_sync(float* p, const detail::Acc& f, unsigned ldm, layout_t layout) {
  const bool col = layout == mem_col_major;
  detail::collective(emu::WarpOp::kWmmaStore, "wmma::store_matrix_sync", p, ldm, 4,
                     detail::mix(reinterpret_cast<uintptr_t>(p), f), col);
  const unsigned first = detail::lane() * 8;
  for (unsigned e = first; e < first + 8; ++e) p[detail::at(int(e / 16), int(e % 16), ldm, col)] = f.x[e];
}

// d = a * b + c; d may be c.
template <typename T, typename LA, typename LB>
void mma_sync(detail::Acc& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a, const fragment<matrix_b, 16, 16, 16, T, LB>& b,
              const detail::Acc& c) {
  detail::collective(emu::WarpOp::kWmmaMma, "wmma::mma_sync", nullptr, 0, 1,
                     detail::mix(detail::mix(detail::mix(0xcbf29ce484222325ull, a), b), c), 0);
  double fa[256], fb[256];
  float out[256];
  for (int i = 0; i < 256; ++i) fa[i] = detail::widen(a.x[i]), fb[i] = detail::widen(b.x[i]);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double s = c.x[i * 16 + j];
      for (int kk = 0; kk < 16; ++kk) s += fa[i * 16 + kk] * fb[kk * 16 + j];  // exact
      out[i * 16 + j] = float(s);
    }
  std::memcpy(d.x, out, sizeof out);
}

}  // namespace nvcuda::wmma
