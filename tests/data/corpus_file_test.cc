// CorpusFile and TextDocumentReader over the corpus formats: text and JSON Lines, each plain,
// gzip- or Zstandard-compressed, give the same units and the same documents; a line longer than the
// reader's buffer comes whole; "auto" picks the format by name and refuses a JSON record it
// would read as text; a damaged or cut compressed stream, bytes after it, and a bad record are
// corrupt, naming the file, line and offset; each line's start in the text is known.
#include "lansbert/data/corpus_file.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>

#include "corpus_test_fixture.h"
#include "lansbert/data/text_reader.h"

namespace lansbert {
namespace {

class CorpusFileTest : public CorpusTestBase {
 protected:
  std::string write_gz(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_ / name).string();
    gzFile f = gzopen(p.c_str(), "wb");
    EXPECT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
    gzclose(f);
    return p;
  }
  // Zstandard frames with checksums, one per part (several frames one after another are one
  // stream, as `cat a.zst b.zst` makes).
  std::string zst_bytes(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& part : parts) {
      ZSTD_CCtx* c = ZSTD_createCCtx();
      ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
      std::string frame(ZSTD_compressBound(part.size()), '\0');
      const size_t n = ZSTD_compress2(c, frame.data(), frame.size(), part.data(), part.size());
      ZSTD_freeCCtx(c);
      EXPECT_FALSE(ZSTD_isError(n));
      out += frame.substr(0, n);
    }
    return out;
  }
};

const char* kText = "First doc. Its second sentence.\nA paragraph line.\n\n\nSecond doc here!\r\n \nThird, no newline";
const char* kJsonl =
    R"({"text": "First doc. Its second sentence.\nA paragraph line.", "id": 1})"
    "\n\n"
    R"({"id": 2, "text": "Second doc here!\r\n"})"
    "\n"
    R"({"text": ""})"
    "\n"
    R"({"text": "Third, no newline"})";

TEST_F(CorpusFileTest, TextAndJsonLinesPlainOrCompressedGiveTheSameDocuments) {
  const auto want = documents({write("a.txt", kText)});
  ASSERT_EQ(want.size(), 3u);
  EXPECT_EQ(want[0], (std::vector<std::string>{"First doc.", "Its second sentence.", "A paragraph line."}));
  EXPECT_EQ(want[1], (std::vector<std::string>{"Second doc here!"}));
  EXPECT_EQ(want[2], (std::vector<std::string>{"Third, no newline"}));
  EXPECT_EQ(documents({write_gz("a.txt.gz", kText)}), want);
  EXPECT_EQ(documents({write("a.jsonl", kJsonl)}), want);
  EXPECT_EQ(documents({write_gz("a.ndjson.gz", kJsonl)}), want);
  const std::string text(kText), jsonl(kJsonl);
  EXPECT_EQ(documents({write("a.jsonl.zst", zst_bytes({jsonl}))}), want);
  EXPECT_EQ(documents({write("b.txt.zst", zst_bytes({text.substr(0, 20), text.substr(20)}))}), want);
  // pzstd's files start with a skippable frame (magic 0x184D2A50, a 4-byte size, the payload).
  const std::string skippable = std::string("\x50\x2a\x4d\x18\x03\x00\x00\x00" "abc", 11);
  EXPECT_EQ(documents({write("c.jsonl.zst", skippable + zst_bytes({jsonl}))}), want);
  // Concatenated gzip members (`cat a.gz b.gz`) are one text.
  std::string two_members;
  for (const auto& [name, part] : {std::pair{"m1.gz", text.substr(0, 33)}, std::pair{"m2.gz", text.substr(33)}}) {
    std::ifstream in(write_gz(name, part), std::ios::binary);
    two_members.append(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(documents({write("d.txt.gz", two_members)}), want);
  // Files of both formats in one run; a file's end ends its last document.
  auto two = documents({write("b.jsonl", kJsonl), write("b.txt", kText)});
  ASSERT_EQ(two.size(), 6u);
  EXPECT_EQ(std::vector(two.begin() + 3, two.end()), want);
  // --records-per-document 2: the three records make two documents (a file's end ends the
  // second); text files are not regrouped.
  CorpusOptions pairs;
  pairs.records_per_document = 2;
  const auto grouped = documents({write("g.jsonl", kJsonl), write("g.txt", kText)}, pairs);
  ASSERT_EQ(grouped.size(), 5u);
  std::vector<std::string> first = want[0];
  first.insert(first.end(), want[1].begin(), want[1].end());
  EXPECT_EQ(grouped[0], first);
  EXPECT_EQ(grouped[1], want[2]);
  EXPECT_EQ(std::vector(grouped.begin() + 2, grouped.end()), want);
}

TEST_F(CorpusFileTest, UnitsAreLinesOrRecords) {
  std::vector<std::string> got;
  ASSERT_TRUE(units(write("u.txt", "a\n\nb"), {}, &got).is_ok());
  EXPECT_EQ(got, (std::vector<std::string>{"a", "", "b"}));
  got.clear();
  ASSERT_TRUE(units(write("u.jsonl", "{\"body\": \"x\\ny\"}\n \n{\"body\": \"z\"}\n"), {"auto", "body"}, &got).is_ok());
  EXPECT_EQ(got, (std::vector<std::string>{"x\ny", "z"}));
  // A record longer than the 1 MiB buffer comes whole, and the line count stays right.
  const std::string big(3 << 20, 'w');
  got.clear();
  CorpusFile f;
  ASSERT_TRUE(f.open(write_gz("big.jsonl.gz", "{\"text\": \"" + big + "\"}\n{\"text\": \"end\"}\n"), {}).is_ok());
  std::string text;
  bool ok = false;
  ASSERT_TRUE(f.next(&text, &ok).is_ok() && ok);
  EXPECT_EQ(text, big);
  ASSERT_TRUE(f.next(&text, &ok).is_ok() && ok);
  EXPECT_EQ(text, "end");
  EXPECT_EQ(f.line_no(), 2);
}

// line_start() is where each line begins in the text, across the buffer's refills (3 MiB of
// lines of many lengths through a 1 MiB buffer), plain and decompressed, the last line without
// its newline: what `lansbert tokenize` names in its errors.
TEST_F(CorpusFileTest, LineStartIsTheTextOffsetOfEachLine) {
  std::string text;
  std::vector<uint64_t> starts;
  for (int i = 0; text.size() < (3u << 20); ++i) {
    starts.push_back(text.size());
    text += std::string(size_t(i * 7919 % 70001), 'a' + char(i % 26)) + "\n";
  }
  starts.push_back(text.size());
  text += "tail";
  for (const std::string& path : {write("s.txt", text), write_gz("s.txt.gz", text)}) {
    SCOPED_TRACE(path);
    CorpusFile f;
    ASSERT_TRUE(f.open(path, {}).is_ok());
    std::string line;
    bool got = false;
    for (size_t i = 0; i < starts.size(); ++i) {
      ASSERT_TRUE(f.next(&line, &got).is_ok());
      ASSERT_TRUE(got) << "line " << i + 1;
      ASSERT_EQ(f.line_start(), starts[i]) << "line " << i + 1;
      ASSERT_EQ(line, text.substr(starts[i], line.size()));
    }
    EXPECT_EQ(line, "tail");
    ASSERT_TRUE(f.next(&line, &got).is_ok());
    EXPECT_FALSE(got);
  }
}

TEST_F(CorpusFileTest, AutoPicksTheFormatByName) {
  const CorpusOptions autod;
  EXPECT_EQ(corpus_format_of("x.jsonl", autod), CorpusFormat::kJsonl);
  EXPECT_EQ(corpus_format_of("x.jsonl.gz", autod), CorpusFormat::kJsonl);
  EXPECT_EQ(corpus_format_of("x.ndjson", autod), CorpusFormat::kJsonl);
  EXPECT_EQ(corpus_format_of("x.jsonl.zst", autod), CorpusFormat::kJsonl);
  EXPECT_EQ(corpus_format_of("x.txt.gz", autod), CorpusFormat::kText);
  EXPECT_EQ(corpus_format_of("c4-train.00000-of-01024.json.gz", autod), CorpusFormat::kJsonl);
  EXPECT_EQ(corpus_format_of("X.JSONL.GZ", autod), CorpusFormat::kJsonl);
  EXPECT_EQ(corpus_format_of("wiki_00", autod), CorpusFormat::kText);
  EXPECT_EQ(corpus_format_of("x.txt", {"jsonl", "text"}), CorpusFormat::kJsonl);
  EXPECT_EQ(corpus_format_of("x.jsonl", {"text", "text"}), CorpusFormat::kText);
  EXPECT_EQ(check_corpus_options({"xml", "text"}).message(),
            "--input-format xml: expected auto, text, jsonl, mediawiki or book");
  // A file "auto" reads as text whose first line is a JSON record is refused, not read as one
  // document of JSON syntax; --input-format text reads it as text.
  const std::string named_text = write("dump.txt", "\n{\"text\": \"One. Two.\"}\n");
  std::vector<std::string> got;
  const Status st = units(named_text, autod, &got);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("dump.txt:2: a JSON record with a string field 'text' in a file read as text "
                              "(--input-format auto, by its name): pass --input-format jsonl"),
            std::string::npos)
      << st.message();
  got.clear();
  ASSERT_TRUE(units(named_text, {"text", "text"}, &got).is_ok());
  EXPECT_EQ(got.size(), 2u);
  got.clear();  // another field, or a text line that merely starts with '{', is text
  ASSERT_TRUE(units(write("other.txt", "{\"title\": \"x\"}\n{not json\n"), autod, &got).is_ok());
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(check_corpus_options({"auto", ""}).message(), "--json-key: an empty field name");
}

TEST_F(CorpusFileTest, DamageIsCorruptNamingTheFileAndLine) {
  std::string gz;
  {
    const std::string p = write_gz("whole.txt.gz", std::string(kText) + "\n" + std::string(200000, 'q') + "\n");
    std::ifstream in(p, std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<std::string> got;
  const std::string cut_gz = gz.substr(0, gz.size() - 12);  // no trailer
  Status st = units(write("cut.txt.gz", cut_gz), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  // The line count is of the lines handed out before the damage was reached, the offset where
  // the reader stopped in the file.
  EXPECT_NE(st.message().find("cut.txt.gz: cannot read after line 7 (byte offset " + std::to_string(cut_gz.size()) +
                              " of the file): unexpected end of file"),
            std::string::npos)
      << st.message();
  std::string flipped = gz;
  flipped[flipped.size() - 6] ^= 0x55;  // the CRC-32 of the trailer, checked in the read that
                                        // decodes the whole text (smaller than a read): line 0
  st = units(write("flip.txt.gz", flipped), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  // Found once the CRC-32 is read: the 4-byte length after it is not.
  EXPECT_NE(st.message().find("flip.txt.gz: cannot read after line 0 (byte offset " + std::to_string(gz.size() - 4) +
                              " of the file): incorrect data check"),
            std::string::npos)
      << st.message();

  const std::string zst = zst_bytes({std::string(kText) + "\n", std::string(200000, 'q') + "\n"});
  const std::string cut_zst = zst.substr(0, zst.size() - 9);  // the last frame cut short
  st = units(write("cut.txt.zst", cut_zst), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("cut.txt.zst: cannot read after line 7 (byte offset " + std::to_string(cut_zst.size()) +
                              " of the file): unexpected end of file"),
            std::string::npos)
      << st.message();
  std::string zflipped = zst;
  zflipped[zflipped.size() - 2] ^= 0x55;  // the last frame's checksum
  st = units(write("flip.txt.zst", zflipped), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("flip.txt.zst: cannot read after line 7 (byte offset "), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("Restored data doesn't match checksum"), std::string::npos) << st.message();

  // Bytes after the last member or frame are refused by both formats alike.
  st = units(write("tail.txt.gz", gz + "trailing text\n"), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("bytes after the end of the gzip data that are not another gzip member"),
            std::string::npos)
      << st.message();
  st = units(write("tail.txt.zst", zst + "trailing text\n"), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  st = units(write("nl.txt.gz", gz + "\n"), {}, &got);  // one byte: not the magic's first
  EXPECT_NE(st.message().find("not another gzip member"), std::string::npos) << st.message();
  // A damaged member after a whole one is damage, with zlib's reason, not "trailing bytes".
  std::string second = gz;
  second[second.size() - 6] ^= 0x55;
  st = units(write("two.txt.gz", gz + second), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("incorrect data check"), std::string::npos) << st.message();

  const struct {
    const char* text;
    const char* message;
  } records[] = {
      {"{\"text\": \"ok\"}\n{\"text\": \"x\"", "r.jsonl:2: not a JSON record (at byte offset 12 of the line: unexpected end of input"},
      {"{\"text\": \"ok\"}\n[1]\n", "r.jsonl:2: not a JSON object with a string field 'text' (--json-key)"},
      {"{\"title\": \"no text\"}\n", "r.jsonl:1: not a JSON object with a string field 'text'"},
      {"{\"text\": null}\n", "r.jsonl:1: not a JSON object with a string field 'text'"},
      {"{\"text\": \"caf\xe9\"}\n", "r.jsonl:1: not a JSON record (at byte offset 14 of the line: invalid string: "
                                    "ill-formed UTF-8 byte)"},
  };
  for (const auto& r : records) {
    got.clear();
    st = units(write("r.jsonl", r.text), {}, &got);
    EXPECT_EQ(st.code(), StatusCode::kCorrupt) << r.text;
    EXPECT_NE(st.message().find(r.message), std::string::npos) << st.message();
  }
  st = units((dir_ / "missing.txt").string(), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.to_string();
}

}  // namespace
}  // namespace lansbert
