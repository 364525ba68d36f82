// The emulator's block scheduler: every CUDA thread of a block is a fiber (Boost.Context);
// the scheduler resumes each runnable fiber until it finishes or reaches a barrier, and
// releases a barrier once every thread it names is waiting at it. A pass that releases
// nothing while threads still wait is a deadlock in the kernel, reported with the barrier
// each thread waits at.
#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <numeric>
#include <random>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emu_device.h"
#include "emu_state.h"
#include "emu_streams.h"

namespace emu {

namespace ctx = boost::context;

namespace {

constexpr size_t kStackBytes = 128 * 1024;
constexpr int kMaxThreads = 1024;

// Stacks for one block's fibers, each below a guard page, so a stack overflow faults instead
// of silently overwriting its neighbour. Mapped once per host thread and reused by every block.
class StackPool {
 public:
  StackPool() {
    page_ = size_t(sysconf(_SC_PAGESIZE));
    slot_ = kStackBytes + page_;
    base_ = static_cast<char*>(mmap(nullptr, slot_ * kMaxThreads, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (base_ == MAP_FAILED) fatal("cannot map fiber stacks");
    for (int i = 0; i < kMaxThreads; ++i) mprotect(base_ + i * slot_, page_, PROT_NONE);
  }
  ctx::stack_context stack(int i) const {
    ctx::stack_context s;
    s.size = kStackBytes;
    s.sp = base_ + (i + 1) * slot_;  // stacks grow down from the top of the slot
    return s;
  }

 private:
  char* base_ = nullptr;
  size_t page_ = 0, slot_ = 0;
};

// Hands out the pool's stack for thread i; the pool owns the memory, so deallocate is a no-op.
struct PoolStack {
  const StackPool* pool;
  int index;
  ctx::stack_context allocate() { return pool->stack(index); }
  void deallocate(ctx::stack_context&) noexcept {}
};

enum class Wait { kRunnable, kBlock, kWarp, kDone };

struct Thread {
  ThreadIds ids;
  Wait wait = Wait::kRunnable;
  WarpOp op = WarpOp::kSync;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  int arg = 0;
  const char* barrier_file = nullptr;  // the __syncthreads it waits at
  unsigned barrier_line = 0;
  ctx::fiber fiber;      // the thread, while it is suspended
  ctx::fiber scheduler;  // the scheduler, while the thread runs
};

struct Block {
  std::vector<Thread> threads;
  Thread* running = nullptr;
  const char* kernel = "";
  std::vector<const void*> poisoned;  // __shared__ variables already filled for this block
};

thread_local Block* t_block = nullptr;

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::kSync: return "__syncwarp";
    case WarpOp::kShuffleXor: return "__shfl_xor_sync";
    case WarpOp::kAny: return "__any_sync";
    case WarpOp::kWmmaLoad: return "wmma::load_matrix_sync";
    case WarpOp::kWmmaStore: return "wmma::store_matrix_sync";
    case WarpOp::kWmmaMma: return "wmma::mma_sync";
  }
  return "?";
}

std::string describe(const Thread& t) {
  const uint3& i = t.ids.thread_idx;
  std::string s = "thread (" + std::to_string(i.x) + "," + std::to_string(i.y) + "," + std::to_string(i.z) + ") ";
  switch (t.wait) {
    case Wait::kRunnable: return s + "runnable";
    case Wait::kDone: return s + "exited";
    case Wait::kBlock:
      return s + "at __syncthreads (" + std::string(t.barrier_file ? t.barrier_file : "?") + ":" +
             std::to_string(t.barrier_line) + ")";
    case Wait::kWarp: return s + "at " + op_name(t.op);
  }
  return s;
}

[[noreturn]] void kernel_error(const Block& b, const std::string& what) {
  const uint3& blk = b.threads.front().ids.block_idx;
  fatal("kernel " + std::string(b.kernel) + ", block (" + std::to_string(blk.x) + "," + std::to_string(blk.y) + "," +
        std::to_string(blk.z) + "): " + what);
}

void yield_to_scheduler(Thread& t) { t.scheduler = std::move(t.scheduler).resume(); }

// Releases warp barriers whose lanes have all arrived; returns whether any was released.
bool release_warps(Block& b) {
  bool released = false;
  const int n = int(b.threads.size());
  for (int w0 = 0; w0 < n; w0 += 32) {
    const int lanes = std::min(32, n - w0);
    // The first waiting lane's mask names the lanes that must join.
    int first = -1;
    for (int l = 0; l < lanes && first < 0; ++l)
      if (b.threads[w0 + l].wait == Wait::kWarp) first = l;
    if (first < 0) continue;
    const Thread& f = b.threads[w0 + first];
    bool ready = true;
    for (int l = 0; l < 32; ++l) {
      if (!(f.mask >> l & 1)) continue;
      if (l >= lanes) kernel_error(b, describe(f) + " names lane " + std::to_string(l) + ", which does not exist");
      const Thread& t = b.threads[w0 + l];
      if (t.wait == Wait::kRunnable) ready = false;
      else if (t.wait == Wait::kDone || t.wait == Wait::kBlock)
        kernel_error(b, describe(f) + " (mask " + std::to_string(f.mask) + ") waits for lane " + std::to_string(l) +
                            ", but " + describe(t));
      else if (t.op != f.op || t.mask != f.mask)
        kernel_error(b, "lanes of one warp meet at different warp barriers: " + describe(f) + " and " + describe(t));
      else if (f.op >= WarpOp::kWmmaLoad && (t.value != f.value || t.arg != f.arg))
        kernel_error(b, "lanes of one warp pass " + std::string(op_name(f.op)) +
                            " different pointers, ldm, layouts or fragment contents: " + describe(f) + " and " + describe(t));
    }
    if (!ready) continue;
    uint64_t any = 0;
    for (int l = 0; l < 32; ++l)
      if (f.mask >> l & 1) any |= b.threads[w0 + l].value;
    for (int l = 0; l < 32; ++l) {
      if (!(f.mask >> l & 1)) continue;
      Thread& t = b.threads[w0 + l];
      if (t.op == WarpOp::kShuffleXor) {
        const int src = l ^ t.arg;
        if (src >= 32 || !(f.mask >> src & 1))
          kernel_error(b, describe(t) + " reads lane " + std::to_string(src) + ", outside the mask");
        t.result = b.threads[w0 + src].value;
      } else if (t.op == WarpOp::kAny) {
        t.result = any != 0;
      }
      t.wait = Wait::kRunnable;
    }
    released = true;
  }
  return released;
}

// A __syncthreads completes when every thread that has not exited waits at it.
bool release_block(Block& b) {
  bool any_waiting = false;
  for (const Thread& t : b.threads) {
    if (t.wait == Wait::kRunnable || t.wait == Wait::kWarp) return false;
    any_waiting |= t.wait == Wait::kBlock;
  }
  if (!any_waiting) return false;
  // One barrier for all: threads at two different __syncthreads is undefined in CUDA (the
  // condition around a __syncthreads must be the same for the whole block).
  const Thread* first = nullptr;
  for (const Thread& t : b.threads) {
    if (t.wait != Wait::kBlock) continue;
    if (!first) first = &t;
    else if (t.barrier_line != first->barrier_line || std::string(t.barrier_file) != first->barrier_file)
      kernel_error(b, "threads wait at different __syncthreads: " + describe(*first) + " and " + describe(t));
  }
  for (Thread& t : b.threads)
    if (t.wait == Wait::kBlock) t.wait = Wait::kRunnable;
  return true;
}

Schedule schedule_from_environment() {
  const char* v = std::getenv("LANSBERT_EMU_SCHEDULE");
  const std::string s = v ? v : "";
  if (s.empty() || s == "forward") return Schedule::kForward;
  if (s == "reverse") return Schedule::kReverse;
  if (s == "random") return Schedule::kRandom;
  fatal("LANSBERT_EMU_SCHEDULE=" + s + ": expected forward, reverse or random");
}
std::atomic<int> g_schedule{-1};  // -1: not yet read from the environment

Schedule schedule() {
  int s = g_schedule.load();
  if (s < 0) g_schedule.store(s = int(schedule_from_environment()));
  return Schedule(s);
}

// The threads in the order this pass resumes them.
void order_threads(std::vector<int>& order, uint64_t block_seed, uint64_t pass) {
  std::iota(order.begin(), order.end(), 0);
  const Schedule s = schedule();
  if (s == Schedule::kReverse) std::reverse(order.begin(), order.end());
  if (s == Schedule::kRandom) {
    std::mt19937_64 g(block_seed * 0x9E3779B97F4A7C15ull + pass);
    std::shuffle(order.begin(), order.end(), g);
  }
}

void run_block(Block& b, const StackPool& stacks, const std::function<void()>& body) {
  const int n = int(b.threads.size());
  for (int i = 0; i < n; ++i) {
    Thread& t = b.threads[i];
    t.fiber = ctx::fiber(std::allocator_arg, PoolStack{&stacks, i}, [&t, &body](ctx::fiber&& sched) {
      t.scheduler = std::move(sched);
      body();
      t.wait = Wait::kDone;
      return std::move(t.scheduler);
    });
  }
  const uint3& blk = b.threads.front().ids.block_idx;
  const uint64_t seed = (uint64_t(blk.z) << 42) ^ (uint64_t(blk.y) << 21) ^ blk.x;
  std::vector<int> order(n);
  for (uint64_t pass = 0;; ++pass) {
    bool ran = false;
    order_threads(order, seed, pass);
    for (int i : order) {
      Thread& t = b.threads[i];
      if (t.wait != Wait::kRunnable) continue;
      b.running = &t;
      t.fiber = std::move(t.fiber).resume();
      ran = true;
    }
    b.running = nullptr;
    if (release_block(b) || release_warps(b)) continue;
    if (ran) continue;  // every thread ran to a barrier or its end; look again
    std::string waits;
    for (const Thread& t : b.threads)
      if (t.wait != Wait::kDone) waits += "\n  " + describe(t);
    if (waits.empty()) return;
    kernel_error(b, "deadlock: no barrier can complete" + waits);
  }
}

}  // namespace

void set_schedule(Schedule s) { g_schedule.store(int(s)); }

const ThreadIds& ids() {
  if (!t_block || !t_block->running) fatal("threadIdx/blockIdx read outside a kernel");
  return t_block->running->ids;
}

uint64_t warp_barrier(WarpOp op, unsigned mask, uint64_t value, int arg) {
  Thread& t = *t_block->running;
  const unsigned lane = (t.ids.thread_idx.x + t.ids.block_dim.x * (t.ids.thread_idx.y + t.ids.block_dim.y *
                                                                                        t.ids.thread_idx.z)) % 32;
  if (!(mask >> lane & 1)) kernel_error(*t_block, describe(t) + " calls " + op_name(op) + " with a mask that omits it");
  t.wait = Wait::kWarp;
  t.op = op;
  t.mask = mask;
  t.value = value;
  t.arg = arg;
  yield_to_scheduler(t);
  return t.result;
}

void block_barrier(const char* file, unsigned line) {
  Thread& t = *t_block->running;
  t.wait = Wait::kBlock;
  t.barrier_file = file;
  t.barrier_line = line;
  yield_to_scheduler(t);
}

void poison_shared(void* p, size_t bytes) {
  if (!t_block) fatal("a __shared__ variable outside a kernel");
  std::vector<const void*>& done = t_block->poisoned;
  if (std::find(done.begin(), done.end(), p) != done.end()) return;
  std::memset(p, 0xff, bytes);
  done.push_back(p);
}

void fatal_in_kernel(const std::string& what) {
  if (t_block) kernel_error(*t_block, what);
  fatal(what);
}

// Runs the grid now, on this host thread (queued work, from a stream).
static void run_now(const char* kernel, dim3 g, dim3 bd, uint64_t threads, const std::function<void()>& thread_body) {
  static thread_local StackPool stacks;
  Block b;
  b.kernel = kernel;
  b.threads.resize(threads);
  Block* outer = t_block;
  t_block = &b;
  for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
      for (unsigned bx = 0; bx < g.x; ++bx) {
        b.poisoned.clear();
        int i = 0;
        for (unsigned z = 0; z < bd.z; ++z)
          for (unsigned y = 0; y < bd.y; ++y)
            for (unsigned x = 0; x < bd.x; ++x, ++i) {
              Thread& t = b.threads[i];
              t = Thread{};
              t.ids = ThreadIds{uint3{x, y, z}, uint3{bx, by, bz}, bd, g};
            }
        run_block(b, stacks, thread_body);
      }
  t_block = outer;
}

void run_grid(const char* kernel, const LaunchConfig& cfg, std::function<void()> thread_body) {
  const dim3 g = cfg.grid, bd = cfg.block;
  const uint64_t threads = uint64_t(bd.x) * bd.y * bd.z;
  std::string bad;
  if (g.x == 0 || g.y == 0 || g.z == 0 || threads == 0) bad = "a zero grid or block dimension";
  else if (threads > kMaxThreads || bd.z > 64) bad = std::to_string(threads) + " threads per block";
  else if (g.y > 65535 || g.z > 65535 || g.x > 2147483647u) bad = "grid dimensions beyond the device's";
  else if (cfg.shared_bytes > 0) bad = "dynamic shared memory (not emulated)";
  if (!bad.empty()) {
    launch_failed(kernel, bad);
    return;
  }
  if (!stream_is_valid(cfg.stream)) {
    launch_failed(kernel, "a destroyed or unknown stream");
    return;
  }
  enqueue(cfg.stream, [kernel, g, bd, threads, body = std::move(thread_body)] { run_now(kernel, g, bd, threads, body); });
}

}  // namespace emu
