// Vocab: reads BERT's vocab.txt (line number = id) and validates it, so that every later
// stage can trust ids: no duplicates (a duplicate makes two ids for one piece and the
// tokenizer's choice between them arbitrary) and the five special tokens present.
#include "lansbert/data/vocab.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "lansbert/core/file_io.h"
#include "utf8.h"

namespace lansbert {

namespace {
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// Why token `t` is not text the tokenizer could produce, naming the byte (1-based column), or
// "" when it is. Hugging Face reads vocab.txt as UTF-8 and fails on invalid bytes; a NUL byte
// means a binary file (a shard, a checkpoint) was given as the vocabulary.
std::string bad_token_bytes(std::string_view t) {
  const auto* s = reinterpret_cast<const unsigned char*>(t.data());
  for (size_t i = 0; i < t.size();) {
    if (s[i] == 0) return "column " + std::to_string(i + 1) + ": NUL byte (is this a text file?)";
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    int32_t cp;
    const char* why = "";
    const int len = utf8::decode(s, t.size(), i, &cp, &why);
    if (len == 0) return "column " + std::to_string(i + 1) + ": invalid UTF-8 (" + why + ")";
    i += len;
  }
  return "";
}

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}
}  // namespace

Status Vocab::init(std::vector<std::string> tokens, const std::string& where) {
  if (tokens.empty()) return Status::corrupt(where + ": vocabulary is empty");
  tokens_ = std::move(tokens);
  index_.clear();
  index_.reserve(tokens_.size() * 2);
  hash_ = kFnvBasis;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& t = tokens_[i];
    if (t.empty()) {
      return Status::corrupt(where + ":" + std::to_string(i + 1) + ": empty token");
    }
    if (const std::string why = bad_token_bytes(t); !why.empty())
      return Status::corrupt(where + ":" + std::to_string(i + 1) + ": " + why);
    auto [it, inserted] = index_.emplace(t, static_cast<int32_t>(i));
    if (!inserted) {
      return Status::corrupt(where + ":" + std::to_string(i + 1) + ": duplicate token '" + t +
                             "' (first on line " + std::to_string(it->second + 1) + ")");
    }
    hash_ = fnv1a(hash_, t);
    hash_ = fnv1a(hash_, "\n");
  }
  struct Special {
    const char* name;
    int32_t* slot;
  };
  const Special specials[] = {
      {"[PAD]", &pad_}, {"[UNK]", &unk_}, {"[CLS]", &cls_}, {"[SEP]", &sep_}, {"[MASK]", &mask_}};
  for (const Special& s : specials) {
    *s.slot = find(s.name);
    if (*s.slot < 0) {
      return Status::corrupt(where + ": missing special token " + s.name);
    }
  }
  return Status::ok();
}

Status Vocab::load(const std::string& path, Vocab* out) {
  // A FIFO (a named pipe left where the file was expected) would block the open until a writer
  // comes, for ever; it is refused as the other non-files are. (read_file itself blocks there:
  // tests use that to hold a reader at a point.)
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISFIFO(info.st_mode))
    return Status::io_error("vocabulary file " + path + ": not a regular file (a FIFO)");
  std::string data;
  Status st = read_file(path, &data);  // names a missing path, a directory, a read error
  if (!st.is_ok()) return st.with_prefix("vocabulary file ");
  // Some editors save one; Hugging Face would read it as part of the first token, so it is
  // neither kept nor dropped silently.
  if (data.rfind("\xEF\xBB\xBF", 0) == 0)
    return Status::corrupt(path + ":1: starts with a UTF-8 byte-order mark (bytes EF BB BF): save the file without "
                           "one");
  std::vector<std::string> tokens;
  tokens.reserve(data.size() / 6);
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) nl = data.size();
    size_t end = nl;
    // CRLF files: the \r is line ending, not part of the token.
    if (end > pos && data[end - 1] == '\r') --end;
    tokens.emplace_back(data, pos, end - pos);
    pos = nl + 1;
  }
  Vocab v;
  LB_RETURN_IF_ERROR(v.init(std::move(tokens), path));
  *out = std::move(v);
  return Status::ok();
}

Status Vocab::from_tokens(std::vector<std::string> tokens, Vocab* out) {
  Vocab v;
  LB_RETURN_IF_ERROR(v.init(std::move(tokens), "<tokens>"));
  *out = std::move(v);
  return Status::ok();
}

std::vector<bool> Vocab::continuation_flags() const {
  std::vector<bool> flags(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) flags[i] = tokens_[i].starts_with("##");
  return flags;
}

int32_t Vocab::find(std::string_view token) const {
  auto it = index_.find(token);
  return it == index_.end() ? -1 : it->second;
}

}  // namespace lansbert
