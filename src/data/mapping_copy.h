// copy_from_mapping: a memcpy out of a file mapping that survives the file shrinking under it.
// A read of a mapped page past a file's new end raises SIGBUS, which would kill the run with
// no message (a shard rewritten in place by `cp`, truncated by hand, or on a network file
// system that dropped it). Here such a fault ends the copy and returns false instead, so the
// reader can say which file and record. Any other SIGBUS keeps its earlier handler or default
// disposition (restored, so that its own flags apply).
#pragma once

#include <cstddef>

namespace lansbert {

// REQUIRES: [src, src + n) lies inside a live mapping. Returns false, with dst partly
// written, when reading it faulted.
bool copy_from_mapping(void* dst, const void* src, size_t n);

}  // namespace lansbert
