// PieceTable construction: sized to a load factor under one half so probes stay short.
#include "lansbert/data/piece_table.h"

#include "lansbert/data/vocab.h"

namespace lansbert {

void PieceTable::build(const Vocab& vocab) {
  size_t cap = 16;
  while (cap < 2 * static_cast<size_t>(vocab.size()) + 1) cap <<= 1;
  slots_.assign(cap, Entry{});
  mask_ = cap - 1;
  pool_.clear();
  max_init_ = max_cont_ = 0;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    std::string_view t = vocab.token(id);
    const bool cont = t.size() > 2 && t.substr(0, 2) == "##";
    insert(cont ? t.substr(2) : t, cont, id);
  }
}

void PieceTable::insert(std::string_view bytes, bool cont, int32_t id) {
  uint64_t h = seed(cont);
  for (unsigned char c : bytes) h = extend(h, c);
  size_t slot = mix(h) & mask_;
  while (slots_[slot].id >= 0) {
    const Entry& e = slots_[slot];
    // The first id of a duplicate wins (Vocab rejects duplicates anyway).
    if (e.hash == h && e.cont == cont && std::string_view(pool_.data() + e.off, e.len) == bytes)
      return;
    slot = (slot + 1) & mask_;
  }
  Entry& e = slots_[slot];
  e.hash = h;
  e.off = static_cast<uint32_t>(pool_.size());
  e.len = static_cast<uint32_t>(bytes.size());
  e.id = id;
  e.cont = cont;
  pool_.append(bytes);
  size_t& m = cont ? max_cont_ : max_init_;
  if (bytes.size() > m) m = bytes.size();
}

}  // namespace lansbert
