// Lazy streams for the emulator (emu_streams.h says why). Each stream is a queue of work with
// a count of what has run; a mark is a position in one queue. Work that depends on another
// stream carries that stream's mark and runs it first, so running any work pulls in exactly
// what CUDA orders before it. Marks only name work queued earlier, so there are no cycles.
#include "emu_streams.h"

#include <deque>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "emu_state.h"

namespace emu {

struct StreamQueue {
  bool blocking = true;  // orders with the legacy stream
  std::deque<Work> pending;
  uint64_t queued = 0, done = 0;
};

namespace {

// One lock for every queue; running work may queue or run more (recursive).
std::recursive_mutex& lock() {
  static std::recursive_mutex m;
  return m;
}

StreamQueue& legacy() {
  static StreamQueue q;
  return q;
}

std::set<StreamQueue*>& streams() {
  static std::set<StreamQueue*> s;
  return s;
}

void push(StreamQueue& q, Work w) {
  q.pending.push_back(std::move(w));
  ++q.queued;
}

void run_queue_to(StreamQueue& q, uint64_t position) {
  while (q.done < position) {
    Work w = std::move(q.pending.front());
    q.pending.pop_front();
    w();
    ++q.done;
  }
}

}  // namespace

StreamQueue* new_stream(unsigned flags) {
  std::lock_guard<std::recursive_mutex> g(lock());
  auto* q = new StreamQueue;
  q->blocking = !(flags & cudaStreamNonBlocking);
  streams().insert(q);
  return q;
}

void delete_stream(StreamQueue* q) {
  std::lock_guard<std::recursive_mutex> g(lock());
  run_queue_to(*q, q->queued);
  streams().erase(q);
  delete q;
}

StreamQueue* queue_of(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return &legacy();
  std::lock_guard<std::recursive_mutex> g(lock());
  auto* q = reinterpret_cast<StreamQueue*>(s);
  return streams().count(q) ? q : nullptr;
}

void enqueue(cudaStream_t s, Work w) {
  std::lock_guard<std::recursive_mutex> g(lock());
  StreamQueue* q = queue_of(s);
  if (!q) fatal("work queued on a destroyed or unknown stream");
  // The legacy stream's implicit ordering: with the blocking streams' work queued so far
  // (legacy), or with the legacy stream's (a blocking stream).
  std::vector<Mark> before;
  if (q == &legacy()) {
    for (StreamQueue* o : streams())
      if (o->blocking && o->queued > o->done) before.push_back(Mark{o, o->queued});
  } else if (q->blocking && legacy().queued > legacy().done) {
    before.push_back(Mark{&legacy(), legacy().queued});
  }
  if (before.empty()) {
    push(*q, std::move(w));
    return;
  }
  push(*q, [before = std::move(before), w = std::move(w)] {
    for (const Mark& m : before) run_to(m);
    w();
  });
}

Mark mark(cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> g(lock());
  StreamQueue* q = queue_of(s);
  if (!q) fatal("an event recorded on a destroyed or unknown stream");
  return Mark{q, q->queued};
}

void run_to(const Mark& m) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (m.queue && (m.queue == &legacy() || streams().count(m.queue))) run_queue_to(*m.queue, m.position);
}

bool has_run(const Mark& m) {
  std::lock_guard<std::recursive_mutex> g(lock());
  return !m.queue || !(m.queue == &legacy() || streams().count(m.queue)) || m.queue->done >= m.position;
}

void run_stream(cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> g(lock());
  StreamQueue* q = queue_of(s);
  if (!q) fatal("synchronising a destroyed or unknown stream");
  run_queue_to(*q, q->queued);
}

void run_all() {
  std::lock_guard<std::recursive_mutex> g(lock());
  run_queue_to(legacy(), legacy().queued);
  const std::set<StreamQueue*> all = streams();  // work must not create streams, but a copy costs nothing
  for (StreamQueue* q : all) run_queue_to(*q, q->queued);
}

}  // namespace emu
