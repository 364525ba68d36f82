// Whole-file reads and crash-safe writes. A write goes to a temporary file in the same
// directory, is fsynced, renamed over the target, and the directory is fsynced: a crash at
// any point leaves either the old file or the new one, never a torn mix.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lansbert/core/status.h"

namespace lansbert {

// A file's bytes handed over in order as a writer writes them or a reader reads them, so
// that a checksum is taken on that pass instead of on a second read of the file.
using BytesSeen = std::function<void(const void*, size_t)>;

// Reads all of `path` into `out`. Errors name the path.
Status read_file(const std::string& path, std::string* out);

// Reads `path` front to back in pieces of at most `chunk_bytes`, handing each to `consume`,
// so that a checksum of a multi-gigabyte file needs no buffer of its size; `total` is the
// file's size. Errors name the path (and the byte a read failed at).
Status read_file_in_chunks(const std::string& path, size_t chunk_bytes,
                           const std::function<void(const char*, size_t)>& consume, size_t* total);

// Atomically replaces `path` with the concatenation of `parts`.
Status write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts);

// Whether a run could later write `path` as a directory (kind kDirectory) or a file it
// appends to (kFile), checked without creating anything: an existing path must be of that kind
// and writable; otherwise its nearest existing ancestor must be a writable directory. Errors
// name `field` (the config key) and the path. For checks at start-up, so that a bad output
// path fails before hours of work rather than at the first checkpoint.
enum class PathKind { kDirectory, kFile };
Status check_can_create(const std::string& path, PathKind kind, const std::string& field);

// Creates the directories above `path` that are missing, so that an output file may name a new
// directory (`--out vocab/vocab.txt`), as checkpoint.dir and logging.metrics_file may. Errors
// name `field` and the path.
Status create_parent_directories(const std::string& path, const std::string& field);

// The bytes an unprivileged writer may still use on the file system that holds `path`, or
// would hold it (its nearest existing ancestor when it does not exist yet). False when that
// cannot be read (statvfs fails).
bool free_bytes_under(const std::string& path, uint64_t* free_bytes);

// fsyncs a directory so that a rename inside it is durable.
Status fsync_directory(const std::string& dir);

}  // namespace lansbert
