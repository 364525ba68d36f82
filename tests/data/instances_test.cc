// Instance creation: BERT's proportions (80/10/10 masking, 50% random next) within binomial
// bounds on a large synthetic sample, no masked specials, lengths within seq len, and the
// same instances for any thread count.
#include "lansbert/data/instances.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lansbert/data/philox_stream.h"
#include "test_util.h"

namespace lansbert {
namespace {

// |observed - p| within 5 standard deviations of a binomial(n, p) proportion, plus `bias`.
void expect_proportion(int64_t k, int64_t n, double p, double bias, const char* what) {
  const double sd = std::sqrt(p * (1 - p) / double(n));
  EXPECT_NEAR(double(k) / double(n), p, 5 * sd + bias) << what << ": " << k << " of " << n;
}

TEST(Instances, ProportionsAndInvariants) {
  // Long documents, so the forced random-next of a one-sentence last chunk is rare (< 1%).
  const auto docs = testing::synthetic_documents(200, 300, 30);
  // Unmasked copies tell which masked positions kept, replaced or [MASK]ed their token.
  InstanceOptions opts;
  opts.seed = 99;
  InstanceOptions unmasked = opts;
  unmasked.dynamic_masking = true;
  const MaskingVocab vocab = testing::test_vocab();
  std::vector<Instance> masked_all, plain_all;
  for (int pass = 0; pass < 2; ++pass) {
    create_instances(docs, 0, pass, opts, vocab, 2, &masked_all);
    create_instances(docs, 0, pass, unmasked, vocab, 2, &plain_all);
  }
  ASSERT_EQ(masked_all.size(), plain_all.size());
  ASSERT_GT(masked_all.size(), 10000u);
  int64_t n_masked = 0, n_mask_token = 0, n_same = 0, n_random = 0, n_next = 0;
  for (size_t i = 0; i < masked_all.size(); ++i) {
    const Instance& m = masked_all[i];
    const Instance& u = plain_all[i];
    ASSERT_LE(m.tokens.size(), size_t(opts.max_seq_len));
    ASSERT_EQ(m.tokens.size(), u.tokens.size());
    ASSERT_EQ(u.tokens.front(), vocab.cls_id);
    ASSERT_EQ(u.tokens[u.a_end], vocab.sep_id);
    ASSERT_EQ(u.tokens.back(), vocab.sep_id);
    ASSERT_GE(u.a_end, 2);                       // A is not empty
    ASSERT_LT(u.a_end + 2, int(u.tokens.size()));  // nor is B
    const int candidates = int(u.tokens.size()) - 3;
    const int expect = std::min(opts.max_pred, std::max(1, int(std::lround(candidates * 0.15))));
    ASSERT_EQ(int(m.masked_positions.size()), expect);
    for (size_t k = 0; k < m.masked_positions.size(); ++k) {
      const int p = m.masked_positions[k];
      ASSERT_NE(p, 0);
      ASSERT_NE(p, u.a_end);
      ASSERT_NE(p, int(u.tokens.size()) - 1);
      if (k > 0) {
        ASSERT_LT(m.masked_positions[k - 1], p);
      }
      ASSERT_EQ(m.masked_ids[k], u.tokens[p]);
      ++n_masked;
      if (m.tokens[p] == vocab.mask_id) {
        ++n_mask_token;
      } else if (m.tokens[p] == u.tokens[p]) {
        ++n_same;
      } else {
        ++n_random;
      }
    }
    n_next += m.is_random_next;
  }
  // A random id can equal the original (1 in 30522): negligible against the bounds.
  expect_proportion(n_mask_token, n_masked, 0.8, 0, "[MASK]");
  expect_proportion(n_same, n_masked, 0.1, 0.001, "unchanged");
  expect_proportion(n_random, n_masked, 0.1, 0.001, "random");
  expect_proportion(n_next, int64_t(masked_all.size()), 0.5, 0.01, "random next");
}

TEST(Instances, SameForAnyThreadCount) {
  const auto docs = testing::synthetic_documents(300, 40, 20);
  InstanceOptions opts;
  opts.whole_word = true;
  opts.short_seq_prob = 0.3f;
  const MaskingVocab vocab = testing::test_vocab();
  std::vector<Instance> one, many;
  create_instances(docs, 5000, 1, opts, vocab, 1, &one);
  create_instances(docs, 5000, 1, opts, vocab, 4, &many);
  ASSERT_EQ(one.size(), many.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].tokens, many[i].tokens);
    EXPECT_EQ(one[i].masked_positions, many[i].masked_positions);
    EXPECT_EQ(one[i].is_random_next, many[i].is_random_next);
  }
  // A different document offset (another block) gives different instances.
  std::vector<Instance> other;
  create_instances(docs, 6000, 1, opts, vocab, 1, &other);
  EXPECT_NE(other.front().tokens, one.front().tokens);
}

TEST(Instances, WholeWordMasksWholeWords) {
  const auto docs = testing::synthetic_documents(50, 40, 20);
  InstanceOptions opts;
  opts.whole_word = true;
  const MaskingVocab vocab = testing::test_vocab();
  InstanceOptions plain_opts = opts;
  plain_opts.dynamic_masking = true;
  std::vector<Instance> m, u;
  create_instances(docs, 0, 0, opts, vocab, 1, &m);
  create_instances(docs, 0, 0, plain_opts, vocab, 1, &u);
  for (size_t i = 0; i < m.size(); ++i) {
    std::vector<bool> masked(m[i].tokens.size(), false);
    for (int p : m[i].masked_positions) masked[p] = true;
    for (size_t p = 1; p + 1 < u[i].tokens.size(); ++p) {
      const int32_t t = u[i].tokens[p];
      if (t != vocab.sep_id && vocab.is_continuation[t]) {
        const int32_t prev = u[i].tokens[p - 1];
        if (prev == vocab.cls_id || prev == vocab.sep_id) continue;  // word cut by truncation
        ASSERT_EQ(masked[p], masked[p - 1]) << "instance " << i << " position " << p;
      }
    }
  }
}

TEST(Instances, ShortSequencesAndTruncation) {
  // Sentences longer than the sequence force truncation on every instance.
  const auto docs = testing::synthetic_documents(100, 10, 200);
  InstanceOptions opts;
  opts.max_seq_len = 64;
  opts.max_pred = 10;
  std::vector<Instance> out;
  for (int pass = 0; pass < 3; ++pass) create_instances(docs, 0, pass, opts, testing::test_vocab(), 2, &out);
  for (const auto& inst : out) {
    ASSERT_LE(inst.tokens.size(), 64u);
    ASSERT_LE(inst.masked_positions.size(), 10u);
  }
}

// truncate_pair gives the window that BERT's truncate_seq_pair leaves (pop one token at a
// time from the longer side, front or back by a draw) and uses the stream as it does, so
// the shards are unchanged by computing the cut on lengths.
TEST(Instances, TruncatePairCutsAsPoppingOneByOne) {
  const auto reference = [](std::vector<int32_t>* a, std::vector<int32_t>* b, int64_t max_tokens,
                            PhiloxStream* rng) {
    while (static_cast<int64_t>(a->size() + b->size()) > max_tokens) {
      std::vector<int32_t>* t = a->size() > b->size() ? a : b;
      if (rng->uniform() < 0.5) {
        t->erase(t->begin());
      } else {
        t->pop_back();
      }
    }
  };
  int cases = 0;
  for (int64_t a_len : {0, 1, 2, 7, 60, 61, 62, 300, 2000}) {
    for (int64_t b_len : {0, 1, 3, 60, 61, 500}) {
      for (int64_t max_tokens : {1, 5, 61, 125}) {
        for (uint64_t seed : {1u, 2u, 3u}) {
          std::vector<int32_t> a(a_len), b(b_len);
          for (int64_t i = 0; i < a_len; ++i) a[i] = static_cast<int32_t>(i);
          for (int64_t i = 0; i < b_len; ++i) b[i] = static_cast<int32_t>(100000 + i);
          PhiloxStream ref_rng(RngKey{seed, 5, 9}), rng(RngKey{seed, 5, 9});
          reference(&a, &b, max_tokens, &ref_rng);
          const PairCut cut = truncate_pair(a_len, b_len, max_tokens, &rng);
          const int64_t a_keep = a_len - cut.a_front - cut.a_back, b_keep = b_len - cut.b_front - cut.b_back;
          ASSERT_EQ(a_keep, static_cast<int64_t>(a.size())) << a_len << " " << b_len << " " << max_tokens;
          ASSERT_EQ(b_keep, static_cast<int64_t>(b.size())) << a_len << " " << b_len << " " << max_tokens;
          if (a_keep > 0) {
            ASSERT_EQ(a.front(), cut.a_front);
          }
          if (b_keep > 0) {
            ASSERT_EQ(b.front(), 100000 + cut.b_front);
          }
          ASSERT_EQ(ref_rng.next_u32(), rng.next_u32()) << "the streams drifted apart";
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 9 * 6 * 4 * 3);
}

TEST(Instances, DynamicMaskingIsKeyedBySample) {
  Batch b;
  b.resize(2, 16, 4);
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 12; ++i) {
      b.input_ids[r * 16 + i] = i == 0 ? 101 : (i == 5 || i == 11) ? 102 : 2000 + i;
      b.input_mask[r * 16 + i] = 1;
    }
  }
  const MaskingVocab vocab = testing::test_vocab();
  Batch c = b;
  dynamic_mask_row(&b, 0, 1, 3, 77, 0.15f, false, vocab);
  dynamic_mask_row(&c, 1, 1, 3, 77, 0.15f, false, vocab);  // same key, other row
  EXPECT_EQ(std::vector<int32_t>(b.input_ids.begin(), b.input_ids.begin() + 16),
            std::vector<int32_t>(c.input_ids.begin() + 16, c.input_ids.end()));
  EXPECT_EQ(b.masked_positions[0], c.masked_positions[4]);
  EXPECT_EQ(b.masked_ids[2], Batch::kIgnore);  // round(0.15 * 9) = 1 slot used
  EXPECT_NE(b.masked_positions[0], 0);
}

}  // namespace
}  // namespace lansbert
