// TextSource: the bytes of one corpus file as text: the file as it is, or its gzip, Zstandard
// or bzip2 stream decoded, told apart by the first bytes and not by the name, so a pipe or
// stdin works as a file does. CorpusFile (corpus_file.h) cuts them into lines.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "lansbert/core/status.h"

namespace lansbert {

class TextSource {
 public:
  virtual ~TextSource() = default;
  // Up to n bytes of text into p: their count, 0 at the end (or when n is 0). On failure -1 with *why; *damaged
  // when the stream is damaged, cut short or followed by bytes that are not another member or
  // frame, trailing zeros included, which gzip(1) skips (corrupt input), false when the file
  // could not be read (an I/O error).
  virtual int64_t read(char* p, size_t n, std::string* why, bool* damaged) = 0;
  // Bytes of the file as stored (compressed) consumed so far.
  virtual uint64_t offset() const = 0;
};

// Takes `fd` (closed by the source, or here on failure) and reads up to 4 bytes to choose the
// decoder: gzip (1f 8b), Zstandard (28 b5 2f fd, or a skippable frame 5? 2a 4d 18, which
// pzstd writes first), bzip2 ("BZh" and a digit 1-9), otherwise the bytes as they are.
// io_error naming `name` when even those cannot be read.
Status open_text_source(int fd, const std::string& name, std::unique_ptr<TextSource>* out);

// Calls off this thread's waits on pipes once *cancel is true (they fail with ECANCELED within
// 0.2 s), for a reading thread whose owner is gone; nullptr: none. As a stop signal does.
void set_read_cancel(const std::atomic<bool>* cancel);

}  // namespace lansbert
