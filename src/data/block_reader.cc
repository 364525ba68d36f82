// BlockReader: a std::thread per block and a promise for its result (see block_reader.h). Not
// std::async: its future would wait for the thread when destroyed, so a run that failed on one
// block would still wait for the next to be read, forever where stdin's writer stalls.
#include "block_reader.h"

#include <fmt/format.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>

#include "lansbert/core/stop_signals.h"
#include "lansbert/data/text_reader.h"
#include "text_sources.h"

namespace lansbert {

struct BlockReader::Shared {
  TextDocumentReader reader;
  size_t block_bytes = 0;
  std::function<int()> stop;  // the caller's: called only while `abandoned` is false
  std::string kept;
  std::mutex stop_mutex;
  std::atomic<bool> abandoned{false};  // the BlockReader is gone; its thread ends soon

  // check_stop, or an end once the owner is gone (its `stop` may refer to what went with it).
  Status poll_stop() {
    std::lock_guard<std::mutex> lock(stop_mutex);
    if (abandoned) return Status::interrupted("prep: the run ended; reading ahead stops");
    return check_stop(stop, kept);
  }
};

Status check_stop(const std::function<int()>& stop, const std::string& kept) {
  const int sig = stop ? stop() : 0;
  if (sig == 0) return Status::ok();
  return Status::interrupted(fmt::format("prep: stopped by {}; {}", signal_name(sig), kept));
}

BlockReader::~BlockReader() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(shared_->stop_mutex);  // waits for a stop() in progress
    shared_->abandoned = true;  // also ends a wait on a pipe (set_read_cancel)
  }
  thread_.detach();
}

Status BlockReader::open(const std::vector<std::string>& inputs, const CorpusOptions& corpus, size_t block_bytes,
                         std::function<int()> stop, std::string kept) {
  shared_ = std::make_shared<Shared>();
  LB_RETURN_IF_ERROR(shared_->reader.open(inputs, corpus));
  shared_->block_bytes = block_bytes;
  shared_->stop = std::move(stop);
  shared_->kept = std::move(kept);
  start();
  return Status::ok();
}

// Reads a block into `done`; an exception (out of memory on a huge document) becomes a Status
// rather than ending the process from a thread the caller cannot catch.
void BlockReader::read_into(Shared& shared, std::promise<Result>& done) {
  try {
    set_read_cancel(&shared.abandoned);
    auto raw = std::make_unique<RawBlock>();
    Status s = read_block(shared, raw.get());
    set_read_cancel(nullptr);
    done.set_value({std::move(s), std::move(raw)});
  } catch (const std::exception& e) {
    set_read_cancel(nullptr);
    done.set_value({Status::internal(fmt::format("prep: reading the input failed: {}", e.what())), nullptr});
  }
}

void BlockReader::start() {
  auto done = std::make_shared<std::promise<Result>>();  // shared: still here if no thread starts
  next_ = done->get_future();
  try {
    thread_ = std::thread([shared = shared_, done] { read_into(*shared, *done); });
  } catch (const std::system_error&) {
    read_into(*shared_, *done);  // no thread to be had: the block is read here, not ahead
  }
}

Status BlockReader::next(std::unique_ptr<RawBlock>* block) {
  block->reset();
  if (!error_.is_ok()) return error_;
  if (finished_) return Status::ok();  // the input has ended: an empty block, for good
  auto [status, raw] = next_.get();
  if (thread_.joinable()) thread_.join();
  if (!status.is_ok()) return error_ = status;
  finished_ = raw->last || raw->sentences.empty();
  if (!finished_) start();  // while the caller works on this one
  *block = std::move(raw);
  return Status::ok();
}

uint64_t BlockReader::total_bytes() const { return shared_->reader.total_bytes(); }
bool BlockReader::total_known() const { return shared_->reader.total_known(); }
uint64_t BlockReader::bytes_read() const { return shared_->reader.bytes_read(); }

Status BlockReader::read_block(Shared& s, RawBlock* raw) {
  std::vector<std::string> sentences, origins;
  bool done = false;
  while (raw->bytes < s.block_bytes) {
    LB_RETURN_IF_ERROR(s.poll_stop());
    LB_RETURN_IF_ERROR(s.reader.next(&sentences, &origins, &done));
    if (done) break;
    for (size_t i = 0; i < sentences.size(); ++i) {
      raw->bytes += sentences[i].size();
      raw->sentences.push_back(std::move(sentences[i]));
      raw->origins.push_back(std::move(origins[i]));
    }
    raw->doc_begin.push_back(raw->sentences.size());
  }
  raw->last = done;
  raw->bytes_read = s.reader.bytes_read();
  return Status::ok();
}

}  // namespace lansbert
