// BlockReader: `lansbert prep`'s input, read a block of whole documents at a time on a thread
// of its own, one block ahead of the caller. Reading (decompression, a JSON or XML parse,
// wikitext cleaning, sentence splitting) is serial; done ahead, it overlaps the parallel work
// on the block before. Where a block ends depends on the input alone, so what prep writes does
// not depend on timing.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/corpus_file.h"

namespace lansbert {

struct RawBlock {
  std::vector<std::string> sentences, origins;
  std::vector<size_t> doc_begin{0};  // document d has sentences [doc_begin[d], doc_begin[d+1])
  size_t bytes = 0;
  bool last = false;        // the input ended in this block
  uint64_t bytes_read = 0;  // the reader's position (bytes as stored) after this block
};

// Non-ok (interrupted, naming the signal, then `kept`: "shards is as it was before the run")
// once `stop` reports a signal.
Status check_stop(const std::function<int()>& stop, const std::string& kept);

class BlockReader {
 public:
  BlockReader() = default;
  BlockReader(const BlockReader&) = delete;
  BlockReader& operator=(const BlockReader&) = delete;
  // A read in flight (the caller returned early, on an error) is left to its thread, which
  // owns what it reads, calls `stop` no more, and ends at its next document, or with the
  // process when it waits on a pipe.
  ~BlockReader();

  // Opens the inputs as TextDocumentReader does and starts reading the first block. `stop`
  // is polled between documents, on the reading thread.
  Status open(const std::vector<std::string>& inputs, const CorpusOptions& corpus, size_t block_bytes,
              std::function<int()> stop, std::string kept);
  // Waits for the next block and, unless it is the last, starts reading the one after. After
  // the last: an empty block (null), every time. An error is the reader's, in input order, and
  // is returned again by every later call.
  Status next(std::unique_ptr<RawBlock>* block);

  uint64_t total_bytes() const;  // of the inputs whose size is known (all but a stdin pipe)
  bool total_known() const;
  uint64_t bytes_read() const;  // REQUIRES: no read in flight (the last block was taken)

 private:
  struct Shared;  // the reader and what the thread needs, owned jointly with it
  using Result = std::pair<Status, std::unique_ptr<RawBlock>>;
  void start();
  static void read_into(Shared& shared, std::promise<Result>& done);
  // The next block: whole documents until it holds block_bytes of text, or the input ends.
  static Status read_block(Shared& s, RawBlock* raw);

  std::shared_ptr<Shared> shared_;
  std::thread thread_;
  std::future<Result> next_;
  bool finished_ = false;
  Status error_;
};

}  // namespace lansbert
