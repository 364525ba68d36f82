// The emulator's streams: work queued on a stream runs only when something needs it (a
// synchronising call, a copy to pageable host memory, an event or stream the host waits on,
// work on another stream ordered after it), never merely because it was queued. Missing
// ordering then shows as wrong numbers: a kernel on one stream that reads what another
// stream writes, without an event between them, reads what was there before. That is the
// latest schedule a GPU may choose; a GPU is usually faster, which hides such bugs.
//
// Ordering is CUDA's: the legacy default stream (cudaStreamLegacy, or a null stream) waits
// for all earlier work of the blocking streams (created without cudaStreamNonBlocking), and
// they wait for its earlier work; cudaStreamWaitEvent orders a stream after the work an
// event's last record captured.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

namespace emu {

struct StreamQueue;

// A point in a stream: the work queued on it before the mark.
struct Mark {
  StreamQueue* queue = nullptr;
  uint64_t position = 0;
};

using Work = std::function<void()>;

StreamQueue* new_stream(unsigned flags);
void delete_stream(StreamQueue* q);  // runs its queued work first, as cudaStreamDestroy lets it finish
StreamQueue* queue_of(cudaStream_t s);  // null for an unknown stream

void enqueue(cudaStream_t s, Work w);
Mark mark(cudaStream_t s);
void run_to(const Mark& m);  // everything before the mark (and what it depends on) has run
void run_stream(cudaStream_t s);
bool has_run(const Mark& m);
void run_all();

}  // namespace emu
