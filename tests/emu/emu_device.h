// The device side of the CUDA emulator: what a kernel body sees (threadIdx and friends,
// __syncthreads, warp shuffles and votes, atomics) and emu::launch, which the launch rewrite
// (rewrite_launches.py) puts where the source says kernel<<<grid, block, smem, stream>>>(...).
//
// Why: no session of this project has had a GPU, so the CUDA backend's kernels had only been
// compiled. The emulator runs them, unchanged, on the CPU: each CUDA thread is a fiber, a
// block's threads run one after another on one host thread, and a thread that reaches a
// barrier (__syncthreads, a shuffle, a vote, __syncwarp) yields until every thread the
// barrier names has reached it. That makes indexing, launch shapes, reductions and barrier
// placement testable against the CPU twins. What it cannot show: speed, races between
// threads (fibers never run at the same time), memory-model and stream-timing bugs, and the
// device's own rounding of math functions (expf etc. are the host's here).
//
// Kernels that break the CUDA rules this emulator can see are stopped with a message:
// a barrier that not every thread of the block reaches (deadlock), a shuffle whose mask names
// a lane that has exited or waits at a different barrier, launch shapes the device refuses.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "emu_state.h"

namespace emu {

// --- the running thread -----------------------------------------------------------------
struct ThreadIds {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
// The ids of the emulated thread running on this host thread (set by the scheduler).
const ThreadIds& ids();

// Fills a __shared__ variable with 0xff bytes the first time a thread of the block reaches
// its declaration (the launch rewrite adds the call), so nothing carries over between blocks.
void poison_shared(void* p, size_t bytes);

// kWmma*: the warp-collective calls of include/mma.h, whose lanes must also agree on `value`
// and `arg` (their arguments and fragments).
enum class WarpOp { kSync, kShuffleXor, kAny, kWmmaLoad, kWmmaStore, kWmmaMma };
// Joins a warp-level barrier of `mask` lanes; `value` is this lane's contribution (a shuffle's
// bits or a vote's predicate), `arg` the shuffle's lane mask. Returns the lane's result.
uint64_t warp_barrier(WarpOp op, unsigned mask, uint64_t value, int arg);
[[noreturn]] void fatal_in_kernel(const std::string& what);
// A __syncthreads; every thread of the block must wait at the same one (the same line).
void block_barrier(const char* file, unsigned line);

// The order in which the scheduler resumes a block's threads on each pass, from
// LANSBERT_EMU_SCHEDULE: forward (thread 0 first, the default), reverse, or random (shuffled
// every pass, seeded by the block and pass, so a run repeats). A correct kernel gives the same
// result under every order; one that reads another thread's write without a barrier between
// them does not. set_schedule overrides the environment (tests).
enum class Schedule { kForward, kReverse, kRandom };
void set_schedule(Schedule s);

// --- launches ------------------------------------------------------------------------------
struct LaunchConfig {
  dim3 grid, block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
  LaunchConfig(dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = nullptr)
      : grid(g), block(b), shared_bytes(smem), stream(s) {}
};

// Queues on cfg.stream a run of `thread_body` for every thread of the grid (blocks in order);
// records a launch error (returned by cudaGetLastError) instead when the configuration is
// invalid, as the runtime does at launch.
void run_grid(const char* kernel, const LaunchConfig& cfg, std::function<void()> thread_body);

// The arguments are copied at the launch, as CUDA copies kernel parameters, and every thread
// gets its own copy of them (a kernel may modify its parameters).
template <typename T>
void check_argument(const char* kernel, int index, const T& v) {
  if constexpr (std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>)
    check_device_pointer(std::string(kernel) + ", argument " + std::to_string(index), static_cast<const void*>(v));
}

template <typename Kernel, typename... Args>
void launch(const char* name, const LaunchConfig& cfg, Kernel kernel, Args... args) {
  int index = 0;
  (check_argument(name, index++, args), ...);
  run_grid(name, cfg, [kernel, params = std::tuple<Args...>(std::move(args)...)] {
    std::tuple<Args...> copy = params;
    std::apply(kernel, std::move(copy));
  });
}

template <typename T>
T shuffle_xor(unsigned mask, T v, int lane_mask) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  bits = warp_barrier(WarpOp::kShuffleXor, mask, bits, lane_mask);
  T out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace emu

// --- what kernel source names ----------------------------------------------------------------
#define threadIdx (::emu::ids().thread_idx)
#define blockIdx (::emu::ids().block_idx)
#define blockDim (::emu::ids().block_dim)
#define gridDim (::emu::ids().grid_dim)
#define warpSize 32

inline void __syncthreads(std::source_location at = std::source_location::current()) {
  ::emu::block_barrier(at.file_name(), at.line());
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::emu::warp_barrier(::emu::WarpOp::kSync, mask, 0, 0); }
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  if (width != 32) ::emu::fatal_in_kernel("__shfl_xor_sync with width " + std::to_string(width) + " is not emulated");
  return ::emu::shuffle_xor(mask, v, lane_mask);
}
inline int __any_sync(unsigned mask, int predicate) {
  return int(::emu::warp_barrier(::emu::WarpOp::kAny, mask, predicate != 0, 0));
}

// The runtime's template overload for kernel pointers (declared for nvcc only).
template <typename T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* entry) {
  return ::cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(entry));
}

inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }

// Atomics on host memory; blocks may one day run on several host threads.
template <typename T>
T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}
template <typename T>
T atomicMax(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

// CUDA's device min/max accept mixed integer types; the kernels use them on ints.
template <typename A, typename B>
constexpr auto min(A a, B b) -> std::common_type_t<A, B> {
  return b < a ? b : a;
}
template <typename A, typename B>
constexpr auto max(A a, B b) -> std::common_type_t<A, B> {
  return a < b ? b : a;
}
