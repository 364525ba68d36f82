// BertTokenizer: UTF-8 validation with offsets, WordPiece edge cases, basic tokenization.
#include "lansbert/data/tokenizer.h"

#include <gtest/gtest.h>

#include "test_paths.h"

namespace lansbert {
namespace {

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    vocab_ = new Vocab;
    ASSERT_TRUE(Vocab::load(testing::vocab_path(), vocab_).is_ok());
  }
  static void TearDownTestSuite() { delete vocab_; }
  static std::vector<std::string> tokens(std::string_view text, bool lower = true) {
    TokenizerOptions o;
    o.lower_case = lower;
    BertTokenizer tok(*vocab_, o);
    std::vector<std::string> out;
    EXPECT_TRUE(tok.encode_tokens(text, &out).is_ok());
    return out;
  }
  static Status error_of(std::string_view text) {
    BertTokenizer tok(*vocab_);
    std::vector<int32_t> ids;
    return tok.encode(text, &ids);
  }
  static Vocab* vocab_;
};
Vocab* TokenizerTest::vocab_ = nullptr;

using V = std::vector<std::string>;

TEST_F(TokenizerTest, WordPieceAndPunctuation) {
  EXPECT_EQ(tokens("Unaffable running!"), (V{"una", "##ffa", "##ble", "running", "!"}));
  EXPECT_EQ(tokens("Héllo, WORLD"), (V{"hello", ",", "world"}));
  EXPECT_EQ(tokens(""), V{});
  EXPECT_EQ(tokens(" \t\r\n "), V{});
}

TEST_F(TokenizerTest, CasedKeepsCaseAndAccents) {
  // The uncased vocabulary has neither "Hello" nor "é" (only "e" and "##e").
  EXPECT_EQ(tokens("Hello é", false), (V{"[UNK]", "[UNK]"}));
  EXPECT_EQ(tokens("hello é", true), (V{"hello", "e"}));
}

TEST_F(TokenizerTest, LongWordIsOneUnk) {
  EXPECT_EQ(tokens(std::string(100, 'a')).size(), 50u);  // "aa" "##aa" ..., not [UNK]
  EXPECT_EQ(tokens(std::string(101, 'a')), V{"[UNK]"});
  // The limit counts characters, not bytes: 100 two-byte characters pass.
  std::string e;
  for (int i = 0; i < 100; ++i) e += "\xC3\xA9";  // é, which uncased becomes e
  EXPECT_NE(tokens(e), V{"[UNK]"});
  EXPECT_EQ(tokens("ok " + std::string(150, 'x') + " ok"), (V{"ok", "[UNK]", "ok"}));
}

TEST_F(TokenizerTest, MissingPieceMakesWholeWordUnk) {
  // "\xE2\x98\x83" (snowman) is not in the vocabulary: the word is one [UNK], not "a" [UNK].
  EXPECT_EQ(tokens("a\xE2\x98\x83"), V{"[UNK]"});
}

TEST_F(TokenizerTest, InvalidUtf8NamesOffset) {
  struct Case {
    std::string text;
    size_t offset;
    const char* why;
  };
  const Case cases[] = {
      {"ab\x80", 2, "unexpected continuation byte"},
      {"abc\xC0\xAF", 3, "overlong encoding"},
      {"\xE0\x80\xAF", 0, "overlong encoding"},
      {"x\xF0\x80\x80\xAF", 1, "overlong encoding"},
      {"ok \xED\xA0\x80", 3, "surrogate code point"},
      {"\xED\xBF\xBF", 0, "surrogate code point"},
      {"\xF4\x90\x80\x80", 0, "code point above U+10FFFF"},
      {"hello\xE2\x82", 5, "truncated sequence"},
      {"\xE2\x82z", 0, "truncated sequence"},
      {"aa\xF0\x9F\x98", 2, "truncated sequence"},
      {"\xFF", 0, "byte never valid"},
      {"caf\xC3\xA9 \xF8\x88\x80\x80\x80", 6, "byte never valid"},
  };
  for (const Case& c : cases) {
    Status s = error_of(c.text);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt);
    EXPECT_NE(s.message().find("byte offset " + std::to_string(c.offset) + " "), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s.message();
  }
  EXPECT_TRUE(error_of("\xF4\x8F\xBF\xBF \xEF\xBF\xBD \xF0\x9F\x98\x80").is_ok());
}

TEST_F(TokenizerTest, SplitWordsNormalises) {
  BertTokenizer tok(*vocab_);
  std::vector<std::string> w;
  ASSERT_TRUE(tok.split_words("Ünïcödé\xE2\x80\x8Bx, 中文 a\xC2\xA0"
                              "b don't\x07!",
                              &w)
                  .is_ok());
  EXPECT_EQ(w, (V{"unicodex", ",", "中", "文", "a", "b", "don", "'", "t", "!"}));
  // A dropped control character between two combining marks (classes 226 and 216, kept by
  // accent stripping: not Mn) does not keep them from canonical order, as in Hugging Face,
  // which drops it before NFD.
  w.clear();
  ASSERT_TRUE(tok.split_words("x\xF0\x9D\x85\xAD\x01\xF0\x9D\x85\xA5y", &w).is_ok());
  EXPECT_EQ(w, (V{"x\xF0\x9D\x85\xA5\xF0\x9D\x85\xADy"}));
  TokenizerOptions cased;
  cased.lower_case = false;
  BertTokenizer ctok(*vocab_, cased);
  w.clear();
  ASSERT_TRUE(ctok.split_words("Ünï-Cö", &w).is_ok());
  EXPECT_EQ(w, (V{"Ünï", "-", "Cö"}));
}

TEST_F(TokenizerTest, EncodeAppends) {
  BertTokenizer tok(*vocab_);
  std::vector<int32_t> ids{101};
  ASSERT_TRUE(tok.encode("hello world", &ids).is_ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{101, 7592, 2088}));
}

}  // namespace
}  // namespace lansbert
