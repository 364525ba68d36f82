// PieceTable: the WordPiece lookup structure the tokenizer searches on every word. An
// open-addressing hash table over one byte pool, keyed by (bytes, is-continuation), so a
// "##" piece is found without building the "##"-prefixed string, and the hash of every
// prefix of a word can be computed in one pass (seed, then extend) and then probed longest first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lansbert {

class Vocab;

class PieceTable {
 public:
  // Hash state for a piece; extend one byte at a time (FNV-1a), so the hashes of all
  // prefixes of a word cost one multiply per byte.
  static uint64_t seed(bool continuation) {
    return continuation ? 0x84222325cbf29ce4ULL : 0xcbf29ce484222325ULL;
  }
  static uint64_t extend(uint64_t h, unsigned char c) { return (h ^ c) * 0x100000001b3ULL; }

  // Tokens "##x" (longer than "##") are continuation pieces "x"; all others are word-initial.
  void build(const Vocab& vocab);
  // Returns the id of the piece `bytes` (continuation or not) whose hash is `h`, or -1.
  int32_t find(const char* bytes, size_t len, bool continuation, uint64_t h) const {
    size_t slot = mix(h) & mask_;
    for (;;) {
      const Entry& e = slots_[slot];
      if (e.id < 0) return -1;
      if (e.hash == h && e.len == len && e.cont == continuation &&
          std::char_traits<char>::compare(pool_.data() + e.off, bytes, len) == 0) {
        return e.id;
      }
      slot = (slot + 1) & mask_;
    }
  }
  // Longest piece in bytes, per kind: bounds the greedy search.
  size_t max_len(bool continuation) const { return continuation ? max_cont_ : max_init_; }

 private:
  struct Entry {
    uint64_t hash = 0;
    uint32_t off = 0;
    uint32_t len = 0;
    int32_t id = -1;
    bool cont = false;
  };
  static size_t mix(uint64_t h) { return static_cast<size_t>((h * 0x9E3779B97F4A7C15ULL) >> 17); }
  void insert(std::string_view bytes, bool cont, int32_t id);

  std::vector<Entry> slots_;
  std::string pool_;
  size_t mask_ = 0;
  size_t max_init_ = 0, max_cont_ = 0;
};

}  // namespace lansbert
