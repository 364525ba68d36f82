// WordPieceTrainer: BERT's special-token layout, merge order, determinism, and that a
// trained vocabulary covers its own training text.
#include "lansbert/data/wordpiece_trainer.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "lansbert/data/tokenizer.h"

namespace lansbert {
namespace {

const char* kText[] = {
    "The tokenizer splits text into words and the words into pieces.",
    "A piece that is not at the start of a word carries the ## prefix.",
    "Training merges the most frequent pair of adjacent pieces, again and again,",
    "until the vocabulary reaches its size or no pair is frequent enough.",
    "Lower-casing and accent stripping happen first: Café becomes cafe.",
    "Numbers like 1234 and 2024, and punctuation (commas, dots!) are words too.",
    "Tokenizers tokenize; tokenized tokens are token pieces of tokenizable text.",
};

std::vector<std::string> train(const WordPieceTrainerOptions& o, bool reverse = false) {
  WordPieceTrainer t(o);
  std::vector<std::string> lines(std::begin(kText), std::end(kText));
  if (reverse) std::reverse(lines.begin(), lines.end());
  for (int rep = 0; rep < 3; ++rep) {
    for (const auto& l : lines) EXPECT_TRUE(t.add_text(l).is_ok());
  }
  std::vector<std::string> tokens;
  EXPECT_TRUE(t.train(&tokens).is_ok());
  return tokens;
}

TEST(WordPieceTrainer, BertSpecialLayout) {
  WordPieceTrainerOptions o;
  o.vocab_size = 250;
  const auto v = train(o);
  ASSERT_EQ(v.size(), 250u);
  EXPECT_EQ(v[0], "[PAD]");
  EXPECT_EQ(v[1], "[unused0]");
  EXPECT_EQ(v[99], "[unused98]");
  EXPECT_EQ(v[100], "[UNK]");
  EXPECT_EQ(v[101], "[CLS]");
  EXPECT_EQ(v[102], "[SEP]");
  EXPECT_EQ(v[103], "[MASK]");
  o.unused_tokens = 0;
  const auto w = train(o);
  EXPECT_EQ(std::vector<std::string>(w.begin(), w.begin() + 5),
            (std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}));
  Vocab vocab;
  EXPECT_TRUE(Vocab::from_tokens(w, &vocab).is_ok());  // no duplicates, specials present
}

TEST(WordPieceTrainer, MergesMostFrequentPairFirst) {
  WordPieceTrainerOptions o;
  o.unused_tokens = 0;
  o.vocab_size = 100;
  o.min_frequency = 1;
  WordPieceTrainer t(o);
  t.add_word("low", 5);
  t.add_word("lower", 2);
  t.add_word("newest", 6);
  t.add_word("widest", 3);
  std::vector<std::string> v;
  ASSERT_TRUE(t.train(&v).is_ok());
  // Specials, initial characters, ## characters, then merges.
  const std::vector<std::string> head{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "l",
                                      "n",     "w",     "##d",   "##e",   "##i",    "##o",
                                      "##r",   "##s",   "##t",   "##w"};
  ASSERT_GE(v.size(), head.size() + 3);
  EXPECT_EQ(std::vector<std::string>(v.begin(), v.begin() + head.size()), head);
  // ##s ##t and ##e ##s both occur 9 times; (##e, ##s) has the smaller ids and wins.
  EXPECT_EQ(v[head.size()], "##es");
  EXPECT_EQ(v[head.size() + 1], "##est");
  EXPECT_EQ(v[head.size() + 2], "lo");
}

TEST(WordPieceTrainer, Deterministic) {
  WordPieceTrainerOptions o;
  o.vocab_size = 300;
  EXPECT_EQ(train(o), train(o));
  EXPECT_EQ(train(o), train(o, /*reverse=*/true));  // line order does not matter
}

TEST(WordPieceTrainer, TrainedVocabCoversItsText) {
  WordPieceTrainerOptions o;
  o.vocab_size = 300;
  o.min_frequency = 2;
  Vocab vocab;
  ASSERT_TRUE(Vocab::from_tokens(train(o), &vocab).is_ok());
  BertTokenizer tok(vocab);
  size_t total = 0, unk = 0;
  for (const char* line : kText) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok.encode(line, &ids).is_ok());
    total += ids.size();
    unk += std::count(ids.begin(), ids.end(), vocab.unk_id());
  }
  EXPECT_GT(total, 50u);
  EXPECT_EQ(unk, 0u);  // every character of the text is in the alphabet
}

TEST(WordPieceTrainer, MinFrequencyStopsEarly) {
  WordPieceTrainerOptions o;
  o.unused_tokens = 0;
  o.vocab_size = 1000;
  o.min_frequency = 1000;
  const auto v = train(o);
  EXPECT_LT(v.size(), 1000u);  // specials and characters only
  EXPECT_TRUE(std::none_of(v.begin(), v.end(), [](const std::string& t) {
    return t.size() > 1 && t.rfind("##", 0) != 0 && t[0] != '[' && (t[0] & 0x80) == 0;
  }));
}

TEST(WordPieceTrainer, InvalidUtf8IsAnError) {
  WordPieceTrainer t;
  Status s = t.add_text("ok \xC3");
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("byte offset 3"), std::string::npos);
}

}  // namespace
}  // namespace lansbert
