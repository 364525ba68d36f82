// Our shard format: writer (temp file + fsync + rename) and the mmap reader that validates
// the header on open and each record's CRC32C on read. Layout in docs/data-format.md; the
// offsets below are the only definition of it in code.
#include "lansbert/data/shard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <vector>
#include <filesystem>

#include "lansbert/core/check.h"
#include "lansbert/core/crc32c.h"
#include "lansbert/data/vocab.h"
#include "mapping_copy.h"

namespace lansbert {
namespace {

constexpr size_t kHeaderSize = 256;
constexpr size_t kHeaderCrcOffset = kHeaderSize - 4;
constexpr uint32_t kFlagWholeWord = 1, kFlagDynamic = 2;
constexpr size_t kFirstReserved = 92;  // after the id width at 88

template <typename T>
void put(uint8_t* p, size_t off, T v) { std::memcpy(p + off, &v, sizeof(T)); }
template <typename T>
T get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

void encode_header(const ShardInfo& in, int64_t record_size, uint8_t* h) {
  std::memset(h, 0, kHeaderSize);
  std::memcpy(h, kShardMagic, 8);
  put<uint32_t>(h, 8, kShardVersion);
  put<uint32_t>(h, 12, kHeaderSize);
  put<uint32_t>(h, 16, in.seq_len);
  put<uint32_t>(h, 20, in.max_pred);
  put<uint64_t>(h, 24, in.record_count);
  put<uint64_t>(h, 32, record_size);
  put<uint32_t>(h, 40, in.vocab_size);
  put<uint32_t>(h, 44, (in.whole_word ? kFlagWholeWord : 0) | (in.dynamic_masking ? kFlagDynamic : 0));
  put<uint64_t>(h, 48, in.vocab_hash);
  put<uint64_t>(h, 56, in.seed);
  put<uint32_t>(h, 64, in.dupe_factor);
  put<float>(h, 68, in.masked_lm_prob);
  put<float>(h, 72, in.short_seq_prob);
  put<int32_t>(h, 76, in.cls_id);
  put<int32_t>(h, 80, in.sep_id);
  put<int32_t>(h, 84, in.mask_id);
  put<uint32_t>(h, 88, in.id_bytes);
  put<uint32_t>(h, kHeaderCrcOffset, crc32c(h, kHeaderCrcOffset));
}

void decode_header(const uint8_t* h, ShardInfo* out) {
  out->seq_len = static_cast<int>(get<uint32_t>(h, 16));
  out->max_pred = static_cast<int>(get<uint32_t>(h, 20));
  out->record_count = static_cast<int64_t>(get<uint64_t>(h, 24));
  out->vocab_size = static_cast<int32_t>(get<uint32_t>(h, 40));
  const uint32_t flags = get<uint32_t>(h, 44);
  out->whole_word = flags & kFlagWholeWord;
  out->dynamic_masking = flags & kFlagDynamic;
  out->vocab_hash = get<uint64_t>(h, 48);
  out->seed = get<uint64_t>(h, 56);
  out->dupe_factor = static_cast<int>(get<uint32_t>(h, 64));
  out->masked_lm_prob = get<float>(h, 68);
  out->short_seq_prob = get<float>(h, 72);
  out->cls_id = get<int32_t>(h, 76);
  out->sep_id = get<int32_t>(h, 80);
  out->mask_id = get<int32_t>(h, 84);
}

Status errno_status(const std::string& what, const std::string& path) {
  return Status::io_error(fmt::format("{}: {}: {}", path, what, std::strerror(errno)));
}

Status write_all(int fd, const void* data, size_t n, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno_status("write failed", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

}  // namespace

ShardInfo shard_info_of(const Vocab& vocab) {
  ShardInfo info;
  info.vocab_size = vocab.size();
  info.vocab_hash = vocab.hash();
  info.cls_id = vocab.cls_id();
  info.sep_id = vocab.sep_id();
  info.mask_id = vocab.mask_id();
  return info;
}

int shard_id_bytes(int32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

int64_t shard_record_size(int seq_len, int max_pred, int id_bytes) {
  return id_bytes * int64_t(seq_len) + 8 + (2 + id_bytes) * int64_t(max_pred) + 4;
}

// ---------------------------------------------------------------------------- writer ----

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

Status ShardWriter::create(const std::string& path, const ShardInfo& info,
                           std::unique_ptr<ShardWriter>* out) {
  if (info.seq_len < 0 || info.max_pred < 0 || !shard_shape_ok(uint64_t(info.seq_len), uint64_t(info.max_pred))) {
    return Status::invalid_argument(fmt::format("{}: bad shard shape seq_len={} max_pred={}", path,
                                                info.seq_len, info.max_pred));
  }
  if (info.vocab_size <= 0)
    return Status::invalid_argument(fmt::format("{}: bad shard vocab size {}", path, info.vocab_size));
  std::unique_ptr<ShardWriter> w(new ShardWriter());
  w->path_ = path;
  w->tmp_path_ = path + ".tmp";
  w->info_ = info;
  w->info_.record_count = 0;
  w->info_.id_bytes = shard_id_bytes(info.vocab_size);
  w->record_size_ = shard_record_size(info.seq_len, info.max_pred, w->info_.id_bytes);
  w->fd_ = ::open(w->tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return errno_status("cannot create", w->tmp_path_);
  // Room for the header, written last once the record count is known.
  w->buf_.assign(kHeaderSize, '\0');
  *out = std::move(w);
  return Status::ok();
}

Status ShardWriter::add(const Instance& inst) {
  const int S = info_.seq_len, P = info_.max_pred;
  const int n = static_cast<int>(inst.tokens.size());
  const int m = static_cast<int>(inst.masked_positions.size());
  LB_CHECK(n <= S && m <= P && inst.masked_ids.size() == inst.masked_positions.size());
  const int w = info_.id_bytes;
  // Ids are stored as given (the reader checks them against the vocab); 2 bytes hold any id of
  // a vocab of at most 65,536 entries, and one that does not fit is refused, not truncated.
  auto fits = [&](int32_t id) { return w == 4 || (id >= 0 && id < 65536); };
  for (int i = 0; i < n; ++i)
    if (!fits(inst.tokens[i]))
      return Status::invalid_argument(fmt::format("{}: record {}: token id {} does not fit the shard's 2-byte ids "
                                                  "(vocab size {})", tmp_path_, info_.record_count, inst.tokens[i],
                                                  info_.vocab_size));
  for (int32_t id : inst.masked_ids)
    if (!fits(id))
      return Status::invalid_argument(fmt::format("{}: record {}: masked id {} does not fit the shard's 2-byte ids "
                                                  "(vocab size {})", tmp_path_, info_.record_count, id,
                                                  info_.vocab_size));
  const size_t off = buf_.size();
  buf_.resize(off + record_size_, '\0');
  auto* r = reinterpret_cast<uint8_t*>(buf_.data() + off);
  auto put_id = [&](size_t at, int32_t id) {
    if (w == 2)
      put<uint16_t>(r, at, static_cast<uint16_t>(id));
    else
      put<int32_t>(r, at, id);
  };
  for (int i = 0; i < n; ++i) put_id(size_t(w) * i, inst.tokens[i]);
  const size_t tail = size_t(w) * S;  // lengths, label, masked positions, then their ids
  put<uint16_t>(r, tail, static_cast<uint16_t>(n));
  put<uint16_t>(r, tail + 2, static_cast<uint16_t>(inst.a_end));
  put<uint16_t>(r, tail + 4, static_cast<uint16_t>(m));
  r[tail + 6] = inst.is_random_next ? 1 : 0;
  for (int k = 0; k < m; ++k) {
    put<uint16_t>(r, tail + 8 + 2 * k, static_cast<uint16_t>(inst.masked_positions[k]));
    put_id(tail + 8 + 2 * size_t(P) + size_t(w) * k, inst.masked_ids[k]);
  }
  put<uint32_t>(r, record_size_ - 4, crc32c(r, record_size_ - 4));
  ++info_.record_count;
  if (buf_.size() >= (8u << 20)) return flush();
  return Status::ok();
}

Status ShardWriter::flush() {
  LB_RETURN_IF_ERROR(write_all(fd_, buf_.data(), buf_.size(), tmp_path_));
  buf_.clear();
  return Status::ok();
}

Status ShardWriter::finish() {
  LB_CHECK(fd_ >= 0);
  LB_RETURN_IF_ERROR(flush());
  uint8_t h[kHeaderSize];
  encode_header(info_, record_size_, h);
  if (::pwrite(fd_, h, kHeaderSize, 0) != static_cast<ssize_t>(kHeaderSize)) {
    return errno_status("header write failed", tmp_path_);
  }
  if (::fsync(fd_) != 0) return errno_status("fsync failed", tmp_path_);
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) return errno_status("rename failed", path_);
  // The rename is durable only once the directory entry is.
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------- reader ----

LbShardReader::~LbShardReader() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_size_);
}

Status LbShardReader::open(const std::string& path, std::unique_ptr<LbShardReader>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::not_found(fmt::format("{}: no such shard file", path));
    return errno_status("cannot open", path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return errno_status("cannot stat", path);
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size < kHeaderSize) {
    // A short file that does not even start with the magic is some other file (a text file
    // among the shards), not a truncated shard.
    uint8_t head[8] = {};
    const ssize_t got = ::pread(fd, head, std::min<size_t>(size, 8), 0);
    ::close(fd);
    if (got >= 0 && std::memcmp(head, kShardMagic, size_t(got)) != 0)
      return Status::corrupt(fmt::format("{}: wrong magic at byte offset 0: expected \"LBSHARD\\0\", found {:02x} "
                                         "({} bytes in all): not a lansbert shard", path,
                                         fmt::join(head, head + got, " "), size));
    return Status::corrupt(fmt::format("{}: truncated: file is {} bytes, the header alone needs {}",
                                       path, size, kHeaderSize));
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return errno_status("mmap failed", path);
  std::unique_ptr<LbShardReader> r(new LbShardReader());
  r->path_ = path;
  r->map_ = static_cast<const uint8_t*>(m);
  r->map_size_ = size;
  const uint8_t* h = r->map_;
  if (std::memcmp(h, kShardMagic, 8) != 0) {
    return Status::corrupt(fmt::format(
        "{}: wrong magic at byte offset 0: expected \"LBSHARD\\0\", found {:02x}: not a lansbert "
        "shard", path, fmt::join(h, h + 8, " ")));
  }
  const uint32_t version = get<uint32_t>(h, 8);
  if (version < kShardOldestVersion || version > kShardVersion) {
    return Status::corrupt(fmt::format("{}: unsupported shard version {} at byte offset 8 (this "
                                       "build reads versions {} to {})", path, version, kShardOldestVersion,
                                       kShardVersion));
  }
  const uint32_t stored = get<uint32_t>(h, kHeaderCrcOffset), computed = crc32c(h, kHeaderCrcOffset);
  if (stored != computed) {
    return Status::corrupt(fmt::format("{}: header checksum mismatch over bytes 0..{}: stored "
                                       "{:#010x}, computed {:#010x}", path, kHeaderCrcOffset,
                                       stored, computed));
  }
  // The shape and count as stored (unsigned), before decode_header narrows them to ints: a
  // valid checksum over bad values is a writer's bug, named by the values it wrote.
  const uint32_t stored_seq = get<uint32_t>(h, 16), stored_pred = get<uint32_t>(h, 20);
  if (!shard_shape_ok(stored_seq, stored_pred))
    return Status::corrupt(fmt::format("{}: header seq_len {} / max_pred {} at byte offsets 16 / 20: not a shape "
                                       "prep writes (seq_len in [4, 65535], max_pred in [1, seq_len])",
                                       path, stored_seq, stored_pred));
  decode_header(h, &r->info_);
  // Version 1 stored every id in 4 bytes and left offset 88 zero.
  const uint32_t width = version == 1 ? 4 : get<uint32_t>(h, 88);
  if (width != 2 && width != 4)
    return Status::corrupt(fmt::format("{}: header id width {} at byte offset 88 is neither 2 nor 4", path, width));
  r->info_.id_bytes = static_cast<int>(width);
  if (r->info_.id_bytes == 2 && r->info_.vocab_size > 65536)
    return Status::corrupt(fmt::format("{}: header id width 2 at byte offset 88 cannot hold the vocab size {}",
                                       path, r->info_.vocab_size));
  r->record_size_ = shard_record_size(r->info_.seq_len, r->info_.max_pred, r->info_.id_bytes);
  if (get<uint64_t>(h, 32) != static_cast<uint64_t>(r->record_size_)) {
    return Status::corrupt(fmt::format("{}: header record size {} at byte offset 32 does not "
                                       "match seq_len {} / max_pred {} / {}-byte ids", path,
                                       get<uint64_t>(h, 32), r->info_.seq_len, r->info_.max_pred, r->info_.id_bytes));
  }
  // Flag bits and reserved bytes this version does not define: a later writer's fields, which
  // this build would silently misread, or a writer's bug under a valid checksum.
  const uint32_t flags = get<uint32_t>(h, 44), known = kFlagWholeWord | kFlagDynamic;
  if (flags & ~known)
    return Status::corrupt(fmt::format("{}: header flags {:#x} at byte offset 44 set bits this build does not know "
                                       "({:#x}): a shard from a newer lansbert, or a writer's bug", path, flags,
                                       flags & ~known));
  for (size_t at = kFirstReserved; at < kHeaderCrcOffset; ++at)
    if (h[at] != 0)
      return Status::corrupt(fmt::format("{}: header byte offset {} is {:#04x}; bytes {}..{} are reserved and zero in "
                                         "versions {} to {}: a shard from a newer lansbert, or a writer's bug",
                                         path, at, h[at], kFirstReserved, kHeaderCrcOffset - 1, kShardOldestVersion,
                                         kShardVersion));
  // Fields the loader uses as ids or as a probability: a valid checksum over bad values is a
  // writer's bug, and found here rather than as an out-of-range token in the model.
  const ShardInfo& in = r->info_;
  if (in.vocab_size <= 0)
    return Status::corrupt(fmt::format("{}: header vocab size {} at byte offset 40 is outside [1, 2^31)", path,
                                       uint32_t(in.vocab_size)));  // the stored bytes, unsigned as written
  for (auto [name, id, at] : {std::tuple{"[CLS]", in.cls_id, 76}, {"[SEP]", in.sep_id, 80}, {"[MASK]", in.mask_id, 84}}) {
    if (id < 0 || id >= in.vocab_size)
      return Status::corrupt(fmt::format("{}: header {} id {} at byte offset {} is outside the vocab [0, {})",
                                         path, name, id, at, in.vocab_size));
  }
  if (in.dynamic_masking && !(in.masked_lm_prob > 0.0f && in.masked_lm_prob <= 1.0f))
    return Status::corrupt(fmt::format("{}: header masked_lm_prob {} at byte offset 68 is outside (0, 1]", path,
                                       in.masked_lm_prob));
  // The records the file has room for, against the count stored (unsigned: a count beyond
  // any file must not wrap into a small or negative one).
  const uint64_t stored_count = get<uint64_t>(h, 24), record_bytes = uint64_t(r->record_size_);
  const uint64_t room = (size - kHeaderSize) / record_bytes;
  if (stored_count != room || (size - kHeaderSize) % record_bytes != 0) {
    const bool truncated = stored_count > room;
    const uint64_t first_bad = truncated ? room : stored_count;
    const std::string in_all = stored_count <= (UINT64_MAX - kHeaderSize) / record_bytes
                                   ? fmt::format(" ({} bytes in all)", kHeaderSize + stored_count * record_bytes)
                                   : "";
    return Status::corrupt(fmt::format(
        "{}: {}: header says {} records of {} bytes{}, file has {} bytes; record {} at byte offset {} is {}", path,
        truncated ? "truncated" : "trailing bytes", stored_count, record_bytes, in_all, size, first_bad,
        kHeaderSize + first_bad * record_bytes, truncated ? "incomplete" : "extra"));
  }
  ::madvise(m, size, MADV_RANDOM);
  *out = std::move(r);
  return Status::ok();
}

Status LbShardReader::check_record(int64_t index, const uint8_t** record) const {
  const size_t off = kHeaderSize + size_t(index) * record_size_;
  thread_local std::vector<uint8_t> copy;
  copy.resize(size_t(record_size_));
  if (!copy_from_mapping(copy.data(), map_ + off, copy.size())) {
    struct stat now {};
    if (::stat(path_.c_str(), &now) == 0 && uint64_t(now.st_size) < map_size_)
      return Status::io_error(fmt::format("{}: record {} at byte offset {}: the file is now {} bytes, shorter than "
                                          "the {} it had when opened (truncated, or rewritten in place, under the "
                                          "run): restore it; new shards go under another name, or through "
                                          "`lansbert prep --out`, which replaces files by rename",
                                          path_, index, off, now.st_size, map_size_));
    return Status::io_error(fmt::format("{}: record {} at byte offset {}: a read fault on its mapping (SIGBUS: "
                                        "the file system could not supply the page)", path_, index, off));
  }
  const uint8_t* p = copy.data();
  *record = p;
  const uint32_t stored = get<uint32_t>(p, record_size_ - 4), computed = crc32c(p, record_size_ - 4);
  if (stored != computed) {
    return Status::corrupt(fmt::format("{}: record {} (byte offsets {}..{}) checksum mismatch: "
                                       "stored {:#010x}, computed {:#010x}", path_, index, off,
                                       off + record_size_, stored, computed));
  }
  return Status::ok();
}

Status LbShardReader::verify_all() const {
  const uint8_t* record = nullptr;
  for (int64_t i = 0; i < info_.record_count; ++i) LB_RETURN_IF_ERROR(check_record(i, &record));
  return Status::ok();
}

Status LbShardReader::read(int64_t index, Batch* batch, int row) {
  const int S = info_.seq_len, P = info_.max_pred;
  LB_CHECK(index >= 0 && index < info_.record_count);
  LB_CHECK(batch->seq_len == S && batch->max_pred == P && row >= 0 && row < batch->batch);
  const uint8_t* p = nullptr;
  LB_RETURN_IF_ERROR(check_record(index, &p));
  const size_t off = kHeaderSize + size_t(index) * record_size_;
  const int w = info_.id_bytes;
  const size_t tail = size_t(w) * S;
  auto id_at = [&](size_t at) -> int32_t { return w == 2 ? int32_t(get<uint16_t>(p, at)) : get<int32_t>(p, at); };
  const int n = get<uint16_t>(p, tail), a_end = get<uint16_t>(p, tail + 2);
  const int m = get<uint16_t>(p, tail + 4);
  if (n > S || a_end >= n || m > P) {  // a valid CRC over invalid fields: a writer bug
    return Status::corrupt(fmt::format("{}: record {} at byte offset {}: length {} / a_end {} / "
                                       "masked {} out of range", path_, index, off, n, a_end, m));
  }
  int32_t* ids = batch->input_ids.data() + size_t(row) * S;
  int32_t* seg = batch->segment_ids.data() + size_t(row) * S;
  int32_t* msk = batch->input_mask.data() + size_t(row) * S;
  if (w == 4)
    std::memcpy(ids, p, 4 * size_t(S));
  else
    for (int i = 0; i < S; ++i) ids[i] = get<uint16_t>(p, 2 * size_t(i));
  for (int i = 0; i < S; ++i) {
    seg[i] = i > a_end && i < n ? 1 : 0;
    msk[i] = i < n ? 1 : 0;
  }
  int32_t* mp = batch->masked_positions.data() + size_t(row) * P;
  int32_t* mi = batch->masked_ids.data() + size_t(row) * P;
  for (int k = 0; k < P; ++k) {
    mp[k] = k < m ? get<uint16_t>(p, tail + 8 + 2 * k) : 0;
    mi[k] = k < m ? id_at(tail + 8 + 2 * size_t(P) + size_t(w) * k) : Batch::kIgnore;
  }
  batch->nsp_labels[row] = p[tail + 6];
  return Status::ok();
}

}  // namespace lansbert
