// The emulator's CUDA runtime: the cudart functions lansbert calls, defined on host memory
// with the signatures of the real <cuda_runtime_api.h>, so the CUDA backend links against
// this instead of libcudart. Copies, memsets and launches are queued on their stream and run
// when something needs them (emu_streams.h); the calls that synchronise in CUDA (cudaMemcpy,
// cudaFree, copies to pageable host memory, stream and event synchronisation) run what they
// wait for. cudaStreamQuery on queued work answers "not ready" (left as the last error, as
// some runtimes leave it) and then runs the work; cudaEventQuery runs it and says complete.
//
// What it checks that a GPU would only show as corruption or a crash:
//  - cudaMemcpy/cudaMemset ranges must lie inside one cudaMalloc allocation on the device
//    side (and the copy kind must match where the pointers are);
//  - fresh device allocations are filled with 0xff bytes (NaN as float, -1 as integers), so
//    a kernel that reads memory nobody wrote produces NaN instead of a lucky zero;
//  - cudaFree of a pointer that cudaMalloc did not return.
// The device it reports: LANSBERT_EMU_DEVICES devices (default 1) of compute capability
// LANSBERT_EMU_SM (default 90), LANSBERT_EMU_MEMORY_MIB each (default 16 GiB; allocations
// beyond it fail with cudaErrorMemoryAllocation, as on a full device).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "emu_state.h"
#include "emu_streams.h"

namespace emu {
namespace {


int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
int device_count() { return env_int("LANSBERT_EMU_DEVICES", 1); }
int device_sm() { return env_int("LANSBERT_EMU_SM", 90); }
int driver_version() { return env_int("LANSBERT_EMU_DRIVER", CUDART_VERSION); }  // 12080: CUDA 12.8
size_t device_bytes() { return size_t(env_int("LANSBERT_EMU_MEMORY_MIB", 16 << 10)) << 20; }

struct Event {
  unsigned flags = 0;
  bool recorded = false;
  Mark mark;  // the work its last record captured
  std::shared_ptr<std::chrono::steady_clock::time_point> when;  // set when that work has run
};

struct State {
  std::mutex mu;
  std::map<const char*, size_t> device;  // allocation start -> bytes
  std::map<const char*, size_t> pinned;  // cudaMallocHost buffer start -> bytes
  std::set<const Event*> events;
  size_t allocated = 0;  // bytes in cudaMalloc allocations
};
State& state() {
  static State s;
  return s;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

// The block of `m` holding [p, p + bytes), or nullptr.
const char* range_in(const std::map<const char*, size_t>& m, const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  auto it = m.upper_bound(c);
  if (it == m.begin()) return nullptr;
  --it;
  return c >= it->first && c + bytes <= it->first + it->second ? it->first : nullptr;
}

const char* device_range(const void* p, size_t bytes) { return range_in(state().device, p, bytes); }

void check_device_range(const char* what, const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (bytes && !device_range(p, bytes))
    fatal(std::string(what) + ": " + std::to_string(bytes) + " bytes at " + std::to_string(uintptr_t(p)) +
          " are not inside one device allocation");
}

}  // namespace

[[noreturn]] void fatal(const std::string& what) {
  std::fprintf(stderr, "lansbert CUDA emulator: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void launch_failed(const char* kernel, const std::string& why) {
  std::fprintf(stderr, "lansbert CUDA emulator: launch of %s refused: %s\n", kernel, why.c_str());
  t_last_error = cudaErrorInvalidConfiguration;
}

bool stream_is_valid(cudaStream_t s) { return queue_of(s) != nullptr; }

namespace {
bool is_pinned(const void* p) {
  std::lock_guard<std::mutex> lock(state().mu);
  return range_in(state().pinned, p, 0) != nullptr;
}
}  // namespace

void check_device_pointer(const std::string& where, const void* p) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    if (device_range(p, 0) || range_in(state().pinned, p, 0)) return;
  }
  fatal(where + ": " + std::to_string(uintptr_t(p)) +
        " is neither device memory nor pinned host memory (a GPU would fault)");
}

}  // namespace emu

#if defined(__SANITIZE_ADDRESS__)
// The emulator's builds use AddressSanitizer to find out-of-bounds accesses in kernels; the
// leak check is off because MPI and the test harness keep allocations to their exit.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

using emu::fail;
using emu::state;

extern "C" {

cudaError_t cudaGetLastError() {
  const cudaError_t e = emu::t_last_error;
  emu::t_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return emu::t_last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNoKernelImageForDevice: return "cudaErrorNoKernelImageForDevice";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    default: return "cudaError (emulator: unnamed)";
  }
}
const char* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 0;
  // A driver older than the runtime (LANSBERT_EMU_DRIVER below CUDART_VERSION): the real
  // runtime then reports no device at all, with this error.
  if (emu::driver_version() < CUDART_VERSION) return fail(cudaErrorInsufficientDriver);
  *n = emu::device_count();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= emu::device_count()) return fail(cudaErrorInvalidDevice);
  emu::t_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = emu::t_device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int d) {
  if (d < 0 || d >= emu::device_count()) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *v = emu::device_sm() / 10; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *v = emu::device_sm() % 10; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *v = 4; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *v = 32; return cudaSuccess;
    default: return fail(cudaErrorInvalidValue);
  }
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d < 0 || d >= emu::device_count()) return fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "lansbert CUDA emulator");
  p->major = emu::device_sm() / 10;
  p->minor = emu::device_sm() % 10;
  p->totalGlobalMem = emu::device_bytes();
  p->multiProcessorCount = 4;
  p->maxThreadsPerBlock = 1024;
  p->warpSize = 32;
  p->sharedMemPerBlock = 48 << 10;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = emu::driver_version();
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void*) {
  *a = cudaFuncAttributes{};
  a->maxThreadsPerBlock = 1024;
  a->ptxVersion = a->binaryVersion = emu::device_sm();
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  emu::run_all();
  return cudaSuccess;
}

// --- memory ----------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** p, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().allocated + bytes > emu::device_bytes()) return fail(cudaErrorMemoryAllocation);
  // Exactly the bytes asked for (at least one, so every allocation has its own address), so
  // that an AddressSanitizer build reports a kernel reading or writing past the end; aligned
  // as cudaMalloc's are.
  void* raw = nullptr;
  if (posix_memalign(&raw, 256, bytes ? bytes : 1) != 0) return fail(cudaErrorMemoryAllocation);
  char* m = static_cast<char*>(raw);
  std::memset(m, 0xff, bytes);
  state().device[m] = bytes;
  state().allocated += bytes;
  *p = m;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  emu::run_all();  // cudaFree waits for the device: queued work may still use the memory
  std::lock_guard<std::mutex> lock(state().mu);
  auto it = state().device.find(static_cast<const char*>(p));
  if (it == state().device.end()) emu::fatal("cudaFree of a pointer cudaMalloc did not return");
  state().allocated -= it->second;
  state().device.erase(it);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  void* m = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (!m) return fail(cudaErrorMemoryAllocation);
  std::memset(m, 0xff, bytes);
  std::lock_guard<std::mutex> lock(state().mu);
  state().pinned[static_cast<const char*>(m)] = bytes;
  *p = m;
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) { return cudaMallocHost(p, bytes); }
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  emu::run_all();
  std::lock_guard<std::mutex> lock(state().mu);
  if (!state().pinned.erase(static_cast<const char*>(p))) emu::fatal("cudaFreeHost of a pointer cudaMallocHost did not return");
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  std::lock_guard<std::mutex> lock(state().mu);
  *total = emu::device_bytes();
  *free_bytes = emu::device_bytes() - state().allocated;
  return cudaSuccess;
}

// Host memory that is not pinned is read when the call is made (CUDA stages it) and written
// before the call returns (CUDA waits for the copy); pinned memory is read and written when
// the copy runs, so reading a pinned buffer before synchronising shows stale bytes, as it can
// on a GPU.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  if (!emu::stream_is_valid(s)) return fail(cudaErrorInvalidResourceHandle);
  if (kind == cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return fail(cudaErrorInvalidValue);
  if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) emu::check_device_range("cudaMemcpy destination", dst, n);
  if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) emu::check_device_range("cudaMemcpy source", src, n);
  if (n == 0) return cudaSuccess;
  if (kind == cudaMemcpyDeviceToDevice && static_cast<const char*>(src) < static_cast<char*>(dst) + n &&
      static_cast<char*>(dst) < static_cast<const char*>(src) + n)
    emu::fatal("cudaMemcpy: device ranges overlap");
  if (kind == cudaMemcpyHostToDevice && !emu::is_pinned(src)) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + n);
    emu::enqueue(s, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    return cudaSuccess;
  }
  emu::enqueue(s, [dst, src, n] { std::memmove(dst, src, n); });
  if (kind == cudaMemcpyDeviceToHost && !emu::is_pinned(dst)) emu::run_stream(s);
  return cudaSuccess;
}
// On the legacy stream; returns when the copy is done, except device to device, which the
// runtime does not wait for.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, cudaStreamLegacy);
  if (e == cudaSuccess && kind != cudaMemcpyDeviceToDevice) emu::run_stream(cudaStreamLegacy);
  return e;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t n, cudaStream_t s) {
  if (!emu::stream_is_valid(s)) return fail(cudaErrorInvalidResourceHandle);
  emu::check_device_range("cudaMemset", dst, n);
  if (n) emu::enqueue(s, [dst, value, n] { std::memset(dst, value, n); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* dst, int value, size_t n) { return cudaMemsetAsync(dst, value, n, cudaStreamLegacy); }

// --- streams and events ------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  *s = reinterpret_cast<cudaStream_t>(emu::new_stream(flags));
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || !emu::queue_of(s))
    return fail(cudaErrorInvalidResourceHandle);
  emu::delete_stream(emu::queue_of(s));
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (!emu::stream_is_valid(s)) return fail(cudaErrorInvalidResourceHandle);
  emu::run_stream(s);
  return cudaSuccess;
}
// Work still queued answers "not ready" and, as some runtimes do, leaves that as the thread's
// last error (a poll loop must clear it: the next LB_LAUNCH_CHECK would read it). The queued
// work then runs, as a GPU finishes it while the host polls, so the next query succeeds.
cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (!emu::stream_is_valid(s)) return fail(cudaErrorInvalidResourceHandle);
  if (emu::has_run(emu::mark(s))) return cudaSuccess;
  emu::run_stream(s);
  return fail(cudaErrorNotReady);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  auto* ev = new emu::Event{flags, false, {}, nullptr};
  std::lock_guard<std::mutex> lock(state().mu);
  state().events.insert(ev);
  *e = reinterpret_cast<cudaEvent_t>(ev);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

namespace {
emu::Event* find_event(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(state().mu);
  auto* ev = reinterpret_cast<emu::Event*>(e);
  return state().events.count(ev) ? ev : nullptr;
}
}  // namespace

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  emu::Event* ev = find_event(e);
  if (!ev) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(state().mu);
  state().events.erase(ev);
  delete ev;
  return cudaSuccess;
}
// A record is itself work on the stream: its time is taken when the work before it has run.
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  emu::Event* ev = find_event(e);
  if (!ev || !emu::stream_is_valid(s)) return fail(cudaErrorInvalidResourceHandle);
  auto when = std::make_shared<std::chrono::steady_clock::time_point>();
  emu::enqueue(s, [when] { *when = std::chrono::steady_clock::now(); });
  ev->recorded = true;
  ev->mark = emu::mark(s);
  ev->when = when;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  emu::Event* ev = find_event(e);
  if (!ev) return fail(cudaErrorInvalidResourceHandle);
  if (ev->recorded) emu::run_to(ev->mark);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
// The wait is work on `s` that runs what the event's last record (as of now) captured.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  emu::Event* ev = find_event(e);
  if (!ev || !emu::stream_is_valid(s)) return fail(cudaErrorInvalidResourceHandle);
  if (ev->recorded) emu::enqueue(s, [m = ev->mark] { emu::run_to(m); });
  return cudaSuccess;
}
// As the runtime: both events recorded, neither created with cudaEventDisableTiming, and both
// complete (cudaErrorNotReady otherwise: the caller should have synchronised).
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  emu::Event *a = find_event(start), *b = find_event(end);
  if (!a || !b || (a->flags | b->flags) & cudaEventDisableTiming) return fail(cudaErrorInvalidResourceHandle);
  if (!a->recorded || !b->recorded) return fail(cudaErrorInvalidResourceHandle);
  if (!emu::has_run(a->mark) || !emu::has_run(b->mark)) return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(*b->when - *a->when).count();
  return cudaSuccess;
}

}  // extern "C"
