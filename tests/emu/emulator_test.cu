// Tests of the CUDA emulator itself, written as CUDA (this file goes through the same launch
// rewrite as cuda/*.cu): that barriers, shuffles and votes give CUDA's results, that the
// kernel-bug reports fire (deadlock, a shuffle naming an exited lane), that launches the
// device refuses are refused, that the runtime's memory checks catch bad copies, and that
// wmma (include/mma.h) computes products and keeps a stored tile's lanes apart.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>
#include <nccl.h>

#include <algorithm>

#include <cmath>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <numeric>
#include <random>
#include <vector>

namespace {

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n;
  explicit Dev(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  void put(const std::vector<T>& h) { EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
};

// Per block: sum of in[] over the block through shared memory and a tree of __syncthreads.
__global__ void block_tree_sum(const int* in, int* out) {
  __shared__ int s[256];
  const int t = threadIdx.x;
  s[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

// Per warp: the butterfly sum every lane ends with, and a vote.
__global__ void warp_ops(const int* in, int* sums, int* any_odd) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  sums[i] = v;
  any_odd[i] = __any_sync(0xffffffffu, in[i] & 1);
}

// 2-D blocks: every thread writes its flat coordinates.
__global__ void coords(int* out) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  out[y * gridDim.x * blockDim.x + x] = 1000 * y + x;
}

// Threads 0-15 leave before the others reach __syncthreads: allowed, they no longer count.
__global__ void early_exit_then_barrier(int* out) {
  if (threadIdx.x < 16) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void barrier_in_branch(int* out) {
  if (threadIdx.x == 0) __syncthreads();  // the other threads wait at no barrier: fine in CUDA
  out[threadIdx.x] = 2;                   // only if every thread exits; they do
}

// Lane 3 waits at __syncthreads while its warp shuffles with a mask naming it: a hang on a GPU.
__global__ void shuffle_against_block_barrier(int* out) {
  if (threadIdx.x == 3) {
    __syncthreads();
    return;
  }
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
  __syncthreads();
}

__global__ void shuffle_with_exited_lane(int* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void set_to(float* x, float v) { x[threadIdx.x] = v; }
__global__ void copy(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }

// Lazy streams (emu_streams.h): work runs when waited for, in the order CUDA guarantees and no
// earlier, so a missing event shows.
TEST(CudaEmulator, NonBlockingStreamsAreOrderedOnlyByEvents) {
  Dev<float> x(32), y(32);
  cudaMemset(x.p, 0, 32 * sizeof(float));
  cudaMemset(y.p, 0, 32 * sizeof(float));
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  set_to<<<1, 32, 0, a>>>(x.p, 1.f);
  copy<<<1, 32, 0, b>>>(x.p, y.p);  // nothing orders this after a's write
  cudaStreamSynchronize(b);
  EXPECT_EQ(y.get()[0], 0.f);
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  set_to<<<1, 32, 0, a>>>(x.p, 2.f);
  cudaEventRecord(e, a);
  cudaStreamWaitEvent(b, e, 0);
  copy<<<1, 32, 0, b>>>(x.p, y.p);
  cudaStreamSynchronize(b);
  EXPECT_EQ(y.get()[0], 2.f);
  cudaEventDestroy(e);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST(CudaEmulator, TheLegacyStreamWaitsForBlockingStreams) {
  Dev<float> x(32);
  cudaStream_t s;
  cudaStreamCreate(&s);
  set_to<<<1, 32, 0, s>>>(x.p, 3.f);
  EXPECT_EQ(x.get()[0], 3.f);  // cudaMemcpy runs on the legacy stream, after s's work
  cudaStreamDestroy(s);
}

TEST(CudaEmulator, CopiesToPinnedMemoryLandWhenWaitedFor) {
  Dev<float> x(32);
  float* h = nullptr;
  ASSERT_EQ(cudaMallocHost(&h, 32 * sizeof(float)), cudaSuccess);
  h[0] = -1.f;
  set_to<<<1, 32>>>(x.p, 4.f);
  cudaMemcpyAsync(h, x.p, 32 * sizeof(float), cudaMemcpyDeviceToHost, cudaStreamLegacy);
  EXPECT_EQ(h[0], -1.f);  // not yet: nothing waited
  cudaStreamSynchronize(cudaStreamLegacy);
  EXPECT_EQ(h[0], 4.f);
  cudaFreeHost(h);
}

TEST(CudaEmulator, BlockBarriersOrderSharedMemory) {
  const int blocks = 3, threads = 256;
  std::vector<int> h(blocks * threads);
  std::iota(h.begin(), h.end(), 1);
  Dev<int> in(h.size()), out(blocks);
  in.put(h);
  block_tree_sum<<<blocks, threads>>>(in.p, out.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> got = out.get();
  for (int b = 0; b < blocks; ++b)
    EXPECT_EQ(got[b], std::accumulate(h.begin() + b * threads, h.begin() + (b + 1) * threads, 0)) << "block " << b;
}

TEST(CudaEmulator, ShufflesAndVotesGiveEveryLaneTheWarpResult) {
  const int n = 128;  // four warps, one with only even values
  std::vector<int> h(n);
  for (int i = 0; i < n; ++i) h[i] = i / 32 == 2 ? 2 * i : i;
  Dev<int> in(n), sums(n), odd(n);
  in.put(h);
  warp_ops<<<2, 64, 0, cudaStreamLegacy>>>(in.p, sums.p, odd.p);
  const std::vector<int> s = sums.get(), a = odd.get();
  for (int i = 0; i < n; ++i) {
    const int w = i / 32;
    EXPECT_EQ(s[i], std::accumulate(h.begin() + 32 * w, h.begin() + 32 * (w + 1), 0)) << i;
    EXPECT_EQ(a[i], w == 2 ? 0 : 1) << i;
  }
}

// Reads a neighbour's shared-memory write with no __syncthreads between: a race.
__global__ void racy_neighbour_read(int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = int(threadIdx.x) + 100 * int(blockIdx.x) + 1;
  out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

TEST(CudaEmulator, TheScheduleOrderExposesAMissingBarrier) {
  Dev<int> out(64);
  std::vector<std::vector<int>> got;
  for (emu::Schedule order : {emu::Schedule::kForward, emu::Schedule::kReverse}) {
    emu::set_schedule(order);
    racy_neighbour_read<<<1, 64>>>(out.p);
    got.push_back(out.get());
  }
  emu::set_schedule(emu::Schedule::kForward);
  EXPECT_NE(got[0], got[1]);  // the same kernel and inputs, two answers
  EXPECT_EQ(got[1][0], 2);    // in reverse, thread 1 wrote before thread 0 read
}

TEST(CudaEmulator, TwoDimensionalGridsAndBlocks) {
  const dim3 grid(3, 2), block(4, 5);
  Dev<int> out(size_t(3 * 4) * (2 * 5));
  coords<<<grid, block>>>(out.p);
  const std::vector<int> got = out.get();
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 12; ++x) EXPECT_EQ(got[y * 12 + x], 1000 * y + x);
}

TEST(CudaEmulator, ExitedThreadsDoNotHoldABarrier) {
  Dev<int> out(64);
  cudaMemset(out.p, 0, 64 * sizeof(int));
  early_exit_then_barrier<<<1, 64>>>(out.p);
  const std::vector<int> got = out.get();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], i < 16 ? 0 : 1) << i;
  barrier_in_branch<<<1, 64>>>(out.p);
  EXPECT_EQ(out.get()[63], 2);
}

TEST(CudaEmulatorDeathTest, ReportsAShuffleNamingALaneAtABlockBarrier) {
  Dev<int> out(32);
  EXPECT_DEATH((shuffle_against_block_barrier<<<1, 32>>>(out.p), cudaDeviceSynchronize()), "waits for lane 3, but thread \\(3,0,0\\) at __syncthreads");
}

TEST(CudaEmulatorDeathTest, ReportsAShuffleWithAnExitedLane) {
  Dev<int> out(32);
  EXPECT_DEATH((shuffle_with_exited_lane<<<1, 32>>>(out.p), cudaDeviceSynchronize()), "waits for lane 5, but thread \\(5,0,0\\) exited");
}

TEST(CudaEmulator, RefusesLaunchesTheDeviceWould) {
  Dev<int> out(1);
  coords<<<1, 1025>>>(out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reading the error clears it
  coords<<<dim3(1, 70000), 1>>>(out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  coords<<<0, 32>>>(out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
}

TEST(CudaEmulator, FreshDeviceMemoryIsNaN) {
  Dev<float> x(4);
  for (float v : x.get()) EXPECT_TRUE(std::isnan(v));
}

TEST(CudaEmulatorDeathTest, CopiesOutsideAnAllocationStop) {
  Dev<float> x(4);
  std::vector<float> h(5);
  EXPECT_DEATH(cudaMemcpy(x.p, h.data(), 5 * sizeof(float), cudaMemcpyHostToDevice), "not inside one device allocation");
  EXPECT_DEATH(cudaMemcpy(h.data(), h.data() + 1, sizeof(float), cudaMemcpyDeviceToHost), "not inside one device allocation");
  EXPECT_DEATH(cudaFree(h.data()), "cudaFree of a pointer");
}

#if defined(__SANITIZE_ADDRESS__)
// One thread too many reads and writes past both buffers (i <= n).
__global__ void off_by_one(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) y[i] = x[i];
}

TEST(CudaEmulatorDeathTest, AKernelReadingPastItsBufferStops) {
  Dev<float> x(100), y(100);
  EXPECT_DEATH((off_by_one<<<1, 128>>>(x.p, y.p, 100), cudaDeviceSynchronize()), "heap-buffer-overflow");
}

// An int index computed as a product that overflows (LANSBERT_EMU_ASAN also turns on
// UndefinedBehaviorSanitizer, which has no macro of its own to test for).
__global__ void overflowing_index(int* y, int stride) { y[threadIdx.x] = stride * int(threadIdx.x + 2) % 32; }

TEST(CudaEmulatorDeathTest, SignedOverflowInAKernelStops) {
  Dev<int> y(32);
  EXPECT_DEATH((overflowing_index<<<1, 32>>>(y.p, 2000000000), cudaDeviceSynchronize()), "signed integer overflow");
}
#endif

// Threads 0-15 and 16-31 wait at two different __syncthreads: undefined in CUDA.
__global__ void split_barrier(int* out) {
  if (threadIdx.x < 16)
    __syncthreads();
  else
    __syncthreads();
  out[threadIdx.x] = 1;
}

TEST(CudaEmulatorDeathTest, ThreadsAtDifferentSyncthreadsStop) {
  Dev<int> out(32);
  EXPECT_DEATH((split_barrier<<<1, 32>>>(out.p), cudaDeviceSynchronize()), "threads wait at different __syncthreads");
}

TEST(CudaEmulatorDeathTest, AHostPointerGivenToAKernelStops) {
  static float host[32];
  EXPECT_DEATH(set_to<<<1, 32>>>(host, 1.f), "set_to, argument 0: .* is neither device memory nor pinned");
}

// Half the block sums a slot the other half never writes.
__global__ void sum_half_written(float* out) {
  __shared__ float s[64];
  if (threadIdx.x < 32) s[threadIdx.x] = 1.f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int i = 0; i < 64; ++i) t += s[i];
    out[blockIdx.x] = t;
  }
}

TEST(CudaEmulator, SharedMemoryStartsAsNaNInEveryBlock) {
  Dev<float> out(2);
  sum_half_written<<<2, 64>>>(out.p);
  for (float v : out.get()) EXPECT_TRUE(std::isnan(v)) << v;  // not 32 (zeros) nor the last block's values
}

struct OneRankNccl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  OneRankNccl() {
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  }
  ~OneRankNccl() {
    ncclCommDestroy(comm);
    cudaStreamDestroy(stream);
  }
};

// Work on the legacy stream overwrites the send buffer of a collective queued on the NCCL
// stream, with nothing ordering the two: on a GPU the collective may send either value.
void overwrite_send_buffer_unordered() {
  OneRankNccl n;
  Dev<float> a(32), r(32);
  set_to<<<1, 32>>>(a.p, 1.f);
  cudaDeviceSynchronize();
  ncclAllReduce(a.p, r.p, 32, ncclFloat, ncclSum, n.comm, n.stream);
  set_to<<<1, 32>>>(a.p, 99.f);
  cudaDeviceSynchronize();
}

TEST(CudaEmulatorDeathTest, AnUnorderedWriteToACollectivesSendBufferStops) {
  EXPECT_DEATH(overwrite_send_buffer_unordered(), "ncclAllReduce: its send buffer was written after the call");
}

TEST(CudaEmulator, AnOrderedWriteAfterACollectiveIsFine) {
  OneRankNccl n;
  Dev<float> a(32), r(32);
  set_to<<<1, 32>>>(a.p, 1.f);
  cudaDeviceSynchronize();
  ncclAllReduce(a.p, r.p, 32, ncclFloat, ncclSum, n.comm, n.stream);
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  cudaEventRecord(done, n.stream);
  cudaStreamWaitEvent(cudaStreamLegacy, done, 0);
  set_to<<<1, 32>>>(a.p, 99.f);
  EXPECT_EQ(r.get()[0], 1.f);
  EXPECT_EQ(a.get()[0], 99.f);
  cudaEventDestroy(done);
}

TEST(CudaEmulator, RadixSortPairsIsStableOnTheKeyBits) {
  const std::vector<int32_t> keys = {5, 3, 5, 1, 3, 0, 5};
  std::vector<int32_t> vals(keys.size());
  std::iota(vals.begin(), vals.end(), 0);
  std::vector<int32_t> ko(keys.size()), vo(keys.size());
  size_t bytes = 0;
  ASSERT_EQ(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys.data(), ko.data(), vals.data(), vo.data(), int(keys.size()), 0, 31), cudaSuccess);
  std::vector<char> temp(bytes);
  ASSERT_EQ(cub::DeviceRadixSort::SortPairs(temp.data(), bytes, keys.data(), ko.data(), vals.data(), vo.data(), int(keys.size()), 0, 31), cudaSuccess);
  cudaDeviceSynchronize();
  EXPECT_EQ(ko, (std::vector<int32_t>{0, 1, 3, 3, 5, 5, 5}));
  EXPECT_EQ(vo, (std::vector<int32_t>{5, 3, 1, 4, 0, 2, 6}));
}

// --- wmma (include/mma.h) ----------------------------------------------------------------------
using namespace nvcuda;

// Element (r, c) of an rows x cols matrix stored in layout L (row_major or col_major).
template <typename L>
size_t at(int r, int c, int rows, int cols) {
  return std::is_same_v<L, wmma::col_major> ? size_t(c) * rows + r : size_t(r) * cols + c;
}

// One warp: C[M x N] (row-major) = A[M x K] B[K x N], every tile straight from global memory.
template <typename T, typename LA, typename LB>
__global__ void wmma_gemm(const T* a, const T* b, float* c, int m, int n, int k) {
  for (int i = 0; i < m; i += 16)
    for (int j = 0; j < n; j += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < k; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
        wmma::load_matrix_sync(fa, a + at<LA>(i, kk, m, k), std::is_same_v<LA, wmma::row_major> ? k : m);
        wmma::load_matrix_sync(fb, b + at<LB>(kk, j, k, n), std::is_same_v<LB, wmma::row_major> ? n : k);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(c + size_t(i) * n + j, acc, n, wmma::mem_row_major);
    }
}

// Random operands rounded to T, in the layouts given; `ref` is their product in double.
template <typename T, typename LA, typename LB>
struct GemmCase {
  int m, n, k;
  std::vector<T> a, b;
  std::vector<double> ref;
  GemmCase(int m_, int n_, int k_, unsigned seed) : m(m_), n(n_), k(k_), a(size_t(m) * k), b(size_t(k) * n), ref(size_t(m) * n) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    for (T& v : a) v = T(u(g));
    for (T& v : b) v = T(u(g));
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j)
        for (int kk = 0; kk < k; ++kk)
          ref[size_t(i) * n + j] += double(float(a[at<LA>(i, kk, m, k)])) * double(float(b[at<LB>(kk, j, k, n)]));
  }
  // |got - ref| within 1e-5 of the largest |ref| for every element.
  void expect_near(const std::vector<float>& got) const {
    double big = 0;
    for (double r : ref) big = std::max(big, std::abs(r));
    for (size_t e = 0; e < ref.size(); ++e) EXPECT_NEAR(got[e], ref[e], 1e-5 * big) << "element " << e;
  }
};

template <typename T, typename LA, typename LB>
void check_one_warp_gemm() {
  GemmCase<T, LA, LB> g(32, 48, 64, 7);
  Dev<T> a(g.a.size()), b(g.b.size());
  Dev<float> c(g.ref.size());
  a.put(g.a);
  b.put(g.b);
  wmma_gemm<T, LA, LB><<<1, 32>>>(a.p, b.p, c.p, g.m, g.n, g.k);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  g.expect_near(c.get());
}

TEST(CudaEmulatorWmma, Bf16RowMajorATimesColMajorB) { check_one_warp_gemm<__nv_bfloat16, wmma::row_major, wmma::col_major>(); }
TEST(CudaEmulatorWmma, Bf16RowMajorATimesRowMajorB) { check_one_warp_gemm<__nv_bfloat16, wmma::row_major, wmma::row_major>(); }
TEST(CudaEmulatorWmma, HalfRowMajorATimesColMajorB) { check_one_warp_gemm<__half, wmma::row_major, wmma::col_major>(); }
TEST(CudaEmulatorWmma, HalfColMajorATimesRowMajorB) { check_one_warp_gemm<__half, wmma::col_major, wmma::row_major>(); }

// Four warps, each its own 16x16 tile of C[32x32] = A[32x64] B[64x32] (row-major) through shared
// memory, warp w over the first 16 * (w + 1) columns of A only, so the warps meet their
// barriers different numbers of times. Each warp stores to its own shared tile, then its
// lanes copy that tile out after a __syncwarp.
__global__ void wmma_four_warps(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  __shared__ __align__(32) __nv_bfloat16 as[32 * 64];
  __shared__ __align__(32) __nv_bfloat16 bs[64 * 32];
  __shared__ __align__(32) float cs[4][256];
  for (int e = threadIdx.x; e < 32 * 64; e += blockDim.x) as[e] = a[e], bs[e] = b[e];
  __syncthreads();
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, i = w / 2 * 16, j = w % 2 * 16;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int kk = 0; kk < 16 * (w + 1); kk += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, as + i * 64 + kk, 64);
    wmma::load_matrix_sync(fb, bs + kk * 32 + j, 32);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  for (int e = 0; e < acc.num_elements; ++e) acc.x[e] *= 0.5f;  // uniform: every lane alike
  wmma::store_matrix_sync(cs[w], acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 256; e += 32) c[(i + e / 16) * 32 + j + e % 16] = cs[w][e];
}

TEST(CudaEmulatorWmma, WarpsOfABlockWorkIndependently) {
  const GemmCase<__nv_bfloat16, wmma::row_major, wmma::row_major> g(32, 32, 64, 11);  // inputs only
  std::vector<double> ref(32 * 32, 0.0);  // warp w's tile over its 16 * (w + 1) terms, halved
  for (int w = 0; w < 4; ++w)
    for (int r = 0; r < 16; ++r)
      for (int col = 0; col < 16; ++col) {
        const int i = w / 2 * 16 + r, j = w % 2 * 16 + col;
        for (int kk = 0; kk < 16 * (w + 1); ++kk)
          ref[i * 32 + j] += 0.5 * double(float(g.a[i * 64 + kk])) * double(float(g.b[kk * 32 + j]));
      }
  Dev<__nv_bfloat16> a(g.a.size()), b(g.b.size());
  Dev<float> c(ref.size());
  a.put(g.a);
  b.put(g.b);
  wmma_four_warps<<<1, 128>>>(a.p, b.p, c.p);
  const std::vector<float> got = c.get();
  double big = 0;
  for (double r : ref) big = std::max(big, std::abs(r));
  for (size_t e = 0; e < ref.size(); ++e) EXPECT_NEAR(got[e], ref[e], 1e-5 * big) << "element " << e;
}

// A stored tile is written lane by lane (lane l: elements l*8 .. l*8+7); lane 0 reads element
// 255, lane 31's, with or without a __syncwarp between.
__global__ void wmma_store_then_read(const float* in, float* out, bool sync) {
  __shared__ __align__(32) float s[256];
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(acc, in, 16, wmma::mem_row_major);
  wmma::store_matrix_sync(s, acc, 16, wmma::mem_row_major);
  if (sync) __syncwarp();
  if (threadIdx.x == 0) out[0] = s[255];
}

TEST(CudaEmulatorWmma, AStoredTileIsReadableByOtherLanesOnlyAfterSyncwarp) {
  std::vector<float> h(256);
  std::iota(h.begin(), h.end(), 1.f);
  Dev<float> in(256), out(1);
  in.put(h);
  emu::set_schedule(emu::Schedule::kForward);  // lane 0 runs on before lane 31 stores
  wmma_store_then_read<<<1, 32>>>(in.p, out.p, false);
  EXPECT_TRUE(std::isnan(out.get()[0])) << out.get()[0];  // the shared-memory poison: a race
  wmma_store_then_read<<<1, 32>>>(in.p, out.p, true);
  EXPECT_EQ(out.get()[0], 256.f);
}

// Loaded column-major, stored column-major (ldm 20) and row-major (ldm 16).
__global__ void wmma_col_major_accumulator(const float* in, float* same, float* transposed) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(acc, in, 20, wmma::mem_col_major);
  wmma::store_matrix_sync(same, acc, 20, wmma::mem_col_major);
  wmma::store_matrix_sync(transposed, acc, 16, wmma::mem_row_major);
}

TEST(CudaEmulatorWmma, ColumnMajorAccumulatorsRoundTrip) {
  std::vector<float> h(16 * 20);
  std::iota(h.begin(), h.end(), 0.f);
  Dev<float> in(h.size()), same(h.size()), transposed(256);
  in.put(h);
  wmma_col_major_accumulator<<<1, 32>>>(in.p, same.p, transposed.p);
  const std::vector<float> s = same.get(), t = transposed.get();
  for (int col = 0; col < 16; ++col)
    for (int r = 0; r < 20; ++r) {
      if (r < 16) EXPECT_EQ(s[col * 20 + r], h[col * 20 + r]) << r << "," << col;
      else EXPECT_TRUE(std::isnan(s[col * 20 + r])) << "padding written at " << r << "," << col;
    }
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) EXPECT_EQ(t[r * 16 + col], h[col * 20 + r]) << r << "," << col;
}

// Misuse a GPU would hang on or compute garbage from: a lane that skips a collective call,
// lanes passing different pointers, a partial warp, a bad ldm.
__global__ void wmma_misuse(float* p, int how) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 1.0f);
  if (how == 0 && threadIdx.x == 7) return;
  float* to = how == 1 && threadIdx.x == 3 ? p + 256 : p;
  wmma::store_matrix_sync(to, acc, how == 3 ? 18 : 16, wmma::mem_row_major);
}

TEST(CudaEmulatorWmmaDeathTest, MisuseStopsTheRun) {
  Dev<float> p(512);
  EXPECT_DEATH((wmma_misuse<<<1, 32>>>(p.p, 0), cudaDeviceSynchronize()), "waits for lane 7, but thread \\(7,0,0\\) exited");
  EXPECT_DEATH((wmma_misuse<<<1, 32>>>(p.p, 1), cudaDeviceSynchronize()), "lanes of one warp pass wmma::store_matrix_sync different pointers");
  EXPECT_DEATH((wmma_misuse<<<1, 48>>>(p.p, 2), cudaDeviceSynchronize()), "in a block of 48 threads: .* whole warps");
  EXPECT_DEATH((wmma_misuse<<<1, 32>>>(p.p, 3), cudaDeviceSynchronize()), "ldm 18 is not a multiple of 4");
}

}  // namespace
