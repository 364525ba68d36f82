// prep --near-dedup (near_duplicates.h, minhash.h): the LSH geometry drops about half the
// documents at the threshold;
// two signatures agree in a share of places that estimates the Jaccard similarity of the
// shingle sets; NearDuplicates keeps exactly the documents a naive all-pairs reference keeps
// (a document goes when one band of its signature equals the same band of a kept document),
// whatever the block split and thread count. Through run_prep: prep_dedup_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../../src/data/near_duplicates.h"
#include "lansbert/core/philox.h"
#include "test_util.h"

namespace lansbert {
namespace {

// Random ids from a stream of its own: each call a new stretch of it.
struct Ids {
  uint64_t stream, next = 0;
  int32_t operator()() { return 1000 + static_cast<int32_t>(philox_bits(RngKey{stream, 0, 0}, next++) % 29000); }
};

std::vector<int32_t> random_tokens(Ids& ids, size_t n) {
  std::vector<int32_t> t(n);
  for (auto& id : t) id = ids();
  return t;
}

// The tokens as sentences of `per` tokens (the last one shorter).
Document as_document(const std::vector<int32_t>& tokens, size_t per) {
  Document doc;
  for (size_t i = 0; i < tokens.size(); i += per) {
    doc.emplace_back(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + per));
  }
  return doc;
}

constexpr int32_t kUnk = 100;  // the ids above are 1000 and more

std::vector<uint32_t> signature(const Document& doc, size_t k, uint64_t unk_key = 0) {
  std::vector<uint32_t> sig(k);
  minhash_signature(doc, kUnk, unk_key, sig);
  return sig;
}

std::vector<uint32_t> elementwise_min(std::vector<uint32_t> a, const std::vector<uint32_t>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::min(a[i], b[i]);
  return a;
}

// The signature of a document's windows without [UNK]: the minimum over the signatures of
// each such window alone (a document of exactly one window is that shingle).
std::vector<uint32_t> clean_windows(const std::vector<int32_t>& t, size_t k) {
  std::vector<uint32_t> sig(k, UINT32_MAX);
  for (size_t i = 0; i + kShingleTokens <= t.size(); ++i) {
    const std::vector<int32_t> w(t.begin() + i, t.begin() + i + kShingleTokens);
    if (std::find(w.begin(), w.end(), kUnk) == w.end()) sig = elementwise_min(sig, signature(Document{w}, k));
  }
  return sig;
}

TEST(NearDedup, PlanDropsHalfTheDocumentsAtTheThreshold) {
  const auto slope = [](const LshPlan& q, double s) {
    return (q.drop_probability(s + 1e-6) - q.drop_probability(s - 1e-6)) / 2e-6;
  };
  for (double j = LshPlan::kMinThreshold; j <= LshPlan::kMaxThreshold + 1e-9; j += 0.01) {
    const LshPlan p = plan_lsh(j);
    EXPECT_LE(p.bands * p.rows, LshPlan::kMaxHashes) << j;
    EXPECT_NEAR(p.drop_probability(j), 0.5, LshPlan::kHalfTolerance + 1e-12) << j;
    EXPECT_NEAR(p.drop_probability(p.midpoint()), 0.5, 1e-9) << j;
    EXPECT_LT(p.drop_probability(j - 0.1), p.drop_probability(j)) << j;
    // The steepest at J of every geometry that drops about half there.
    for (int b = 1; b <= LshPlan::kMaxHashes; ++b) {
      for (int r = 1; b * r <= LshPlan::kMaxHashes; ++r) {
        const LshPlan q{b, r};
        if (std::abs(q.drop_probability(j) - 0.5) <= LshPlan::kHalfTolerance) {
          EXPECT_LE(slope(q, j), slope(p, j) * (1 + 1e-6)) << j << ": " << b << "x" << r;
        }
      }
    }
  }
  // The geometry decides which documents go: it is part of the output's definition.
  const LshPlan p = plan_lsh(0.8);
  EXPECT_EQ(p.bands, 10);
  EXPECT_EQ(p.rows, 12);
  EXPECT_LT(p.drop_probability(0.6), 0.03);
  EXPECT_LT(p.drop_probability(0.7), 0.15);
  EXPECT_GT(p.drop_probability(0.9), 0.95);
  EXPECT_GT(p.drop_probability(0.95), 0.999);
  EXPECT_EQ(plan_lsh(0.9).bands, 6);
  EXPECT_EQ(plan_lsh(0.9).rows, 21);
}

TEST(NearDedup, SignaturesEstimateJaccardSimilarity) {
  // A and B share their first m of n tokens, the rest random: of their n - 4 shingles each,
  // m - 4 are shared, so J = (m - 4) / (2 (n - 4) - (m - 4)).
  constexpr size_t n = 400, k = LshPlan::kMaxHashes;
  for (const size_t m : {100, 250, 350, 390}) {
    const double j = double(m - 4) / double(2 * (n - 4) - (m - 4));
    double agree_sum = 0;
    constexpr int pairs = 60;
    for (int t = 0; t < pairs; ++t) {
      Ids ids{uint64_t(1000 * m + t)};
      const auto a = random_tokens(ids, n);
      auto b = a;
      for (size_t i = m; i < n; ++i) b[i] = ids();
      const auto sa = signature(as_document(a, 17), k), sb = signature(as_document(b, 23), k);
      int agree = 0;
      for (size_t i = 0; i < k; ++i) agree += sa[i] == sb[i];
      const double share = double(agree) / k;
      EXPECT_NEAR(share, j, 5 * std::sqrt(j * (1 - j) / k) + 1e-9) << "m " << m << " pair " << t;
      agree_sum += share;
    }
    EXPECT_NEAR(agree_sum / pairs, j, 4 * std::sqrt(j * (1 - j) / (k * pairs))) << "m " << m;
  }
  // A token inserted near the start shifts every shingle after it: A's shingles across the
  // insertion (4) are gone and B has 5 new ones, so J = (n - 8) / (n + 1).
  {
    const double j = double(n - 8) / double(n + 1);
    double agree_sum = 0;
    for (int t = 0; t < 40; ++t) {
      Ids ids{uint64_t(77 + t)};
      const auto a = random_tokens(ids, n);
      auto b = a;
      b.insert(b.begin() + 10, ids());
      const auto sa = signature(as_document(a, 30), k), sb = signature(as_document(b, 30), k);
      int agree = 0;
      for (size_t i = 0; i < k; ++i) agree += sa[i] == sb[i];
      agree_sum += double(agree) / k;
    }
    EXPECT_NEAR(agree_sum / 40, j, 4 * std::sqrt(j * (1 - j) / (k * 40)));
  }
  // A window holding [UNK] is a shingle of its document alone (its key and place), exactly
  // those windows: two documents with [UNK] at the same places and the same key share those
  // shingles and nothing else of theirs, so min(clean(d1), sig(d2)) = min(clean(d2), sig(d1)).
  {
    Ids ids{11};
    const auto joined = [](std::initializer_list<std::vector<int32_t>> parts) {
      std::vector<int32_t> t;
      for (const auto& p : parts) t.insert(t.end(), p.begin(), p.end());
      return t;
    };
    for (int t = 0; t < 20; ++t) {
      const std::vector<int32_t> gap = t % 2 ? std::vector<int32_t>{kUnk} : std::vector<int32_t>{kUnk, 1010, kUnk};
      const auto d1 = joined({random_tokens(ids, 20 + t), gap, random_tokens(ids, 25)});
      const auto d2 = joined({random_tokens(ids, 20 + t), gap, random_tokens(ids, 25)});
      const auto s1 = signature(as_document(d1, 9), k, 77), s2 = signature(as_document(d2, 9), k, 77);
      EXPECT_EQ(elementwise_min(clean_windows(d1, k), s2), elementwise_min(clean_windows(d2, k), s1)) << t;
      EXPECT_NE(s1, signature(as_document(d1, 9), k, 78)) << t;  // the key matters
    }
    // Without [UNK] the key does not matter, and a signature is its windows'.
    const auto plain = random_tokens(ids, 40);
    EXPECT_EQ(signature(as_document(plain, 6), k, 1), signature(as_document(plain, 40), k, 2));
    EXPECT_EQ(signature(as_document(plain, 6), k), clean_windows(plain, k));
    // Text beyond the vocabulary reads as [UNK] between punctuation: two such texts that end in
    // the same English footer are not alike; an exact copy is.
    const auto unknown_text = [&ids](size_t len) {
      std::vector<int32_t> u(len, kUnk);
      for (size_t i = 1; i < u.size(); i += 2) u[i] = ids() % 2 ? 1010 : 1012;
      return u;
    };
    const auto footer = random_tokens(ids, 30);
    const Document x = as_document(joined({unknown_text(300), footer}), 20),
                   y = as_document(joined({unknown_text(300), footer}), 20);
    const auto sx = signature(x, k, 1), sy = signature(y, k, 2);  // each its own key
    int agree = 0;
    for (size_t i = 0; i < k; ++i) agree += sx[i] == sy[i];
    EXPECT_LT(agree, int(k / 10));  // 26 shared windows of 326 each: J = 26 / 626, about 4%
  }
  // Sentence breaks do not matter; order does; a document shorter than a shingle is one.
  Ids ids{7};
  const auto t = random_tokens(ids, 50);
  EXPECT_EQ(signature(as_document(t, 3), k), signature(as_document(t, 50), k));
  auto swapped = t;
  std::swap(swapped[10], swapped[11]);
  EXPECT_NE(signature(as_document(t, 50), k), signature(as_document(swapped, 50), k));
  const Document short_one{{5, 6, 7}}, other_short{{5, 6, 8}}, split_short{{5}, {6, 7}};
  EXPECT_EQ(signature(short_one, k), signature(split_short, k));
  EXPECT_NE(signature(short_one, k), signature(other_short, k));
  EXPECT_NE(signature(Document{{5, 6, 7, 8}}, k), signature(Document{{5, 6, 7, 8, 9}}, k));
}

TEST(NearDedup, OneShingleDocumentsDoNotCollide) {
  // 400,000 distinct documents of two tokens, one shingle each: were the min-hashes made from 32
  // bits of the shingle's hash, about n^2 / 2^33 = 19 pairs would share their whole signature
  // (and the later one of each be dropped); from all 64, none.
  std::vector<std::vector<uint32_t>> sigs;
  for (int32_t i = 0; i < 400000; ++i) sigs.push_back(signature(Document{{1000 + i % 20000, 1000 + i / 20000}}, 4));
  std::sort(sigs.begin(), sigs.end());
  EXPECT_EQ(std::adjacent_find(sigs.begin(), sigs.end()), sigs.end());
}

// The naive reference: all pairs, band by band, against the documents kept so far.
std::vector<size_t> reference_kept(const std::vector<Document>& docs, const LshPlan& plan) {
  const size_t k = size_t(plan.bands) * plan.rows;
  std::vector<std::vector<uint32_t>> kept_sigs;
  std::vector<size_t> kept;
  for (size_t d = 0; d < docs.size(); ++d) {
    const auto sig = signature(docs[d], k);
    bool near = false;
    for (const auto& other : kept_sigs) {
      for (int b = 0; b < plan.bands && !near; ++b) {
        near = std::equal(sig.begin() + b * plan.rows, sig.begin() + (b + 1) * plan.rows, other.begin() + b * plan.rows);
      }
    }
    if (!near) kept_sigs.push_back(sig), kept.push_back(d);
  }
  return kept;
}

// A corpus of originals and chains of edits: each link changes a random stretch of its
// predecessor, so that links near each other are near duplicates and far ones are not (a
// dropped link's successor may be near it but not near any kept document).
std::vector<Document> corpus_with_chains(double threshold) {
  std::vector<Document> docs;
  Ids ids{42};
  for (int c = 0; c < 40; ++c) {
    auto tokens = random_tokens(ids, 150 + 20 * (c % 7));
    docs.push_back(as_document(tokens, 11));
    // A stretch of L changed tokens changes about L + 4 shingles: J = (n - L - 4) / (n + L + 4),
    // so L0 below puts a link right at the threshold; each link changes 0.3 to 1.7 times that.
    const double n = double(tokens.size()) - 4, at_threshold = n * (1 - threshold) / (1 + threshold) - 4;
    for (int link = 0; link < 6; ++link) {
      const auto len = static_cast<size_t>(std::max(1.0, at_threshold * (0.3 + 1.4 * (ids() % 1000) / 1000.0)));
      const size_t at = ids() % (tokens.size() - len);
      for (size_t i = at; i < at + len; ++i) tokens[i] = ids();
      docs.push_back(as_document(tokens, 9 + link));
    }
    docs.push_back(as_document(random_tokens(ids, 3 + c % 3), 2));  // short ones: one shingle each
  }
  docs.push_back(docs[5]);  // an exact copy, at the end
  return docs;
}

std::vector<size_t> kept_positions(const std::vector<Document>& all, const std::vector<Document>& kept) {
  std::vector<size_t> at;
  size_t d = 0;
  for (const Document& doc : kept) {
    while (d < all.size() && all[d] != doc) ++d;
    at.push_back(d++);
  }
  return at;
}

TEST(NearDedup, KeepsWhatTheAllPairsReferenceKeeps) {
  for (const double threshold : {0.5, 0.8, 0.95}) {
    const std::vector<Document> docs = corpus_with_chains(threshold);
    const LshPlan plan = plan_lsh(threshold);
    const std::vector<size_t> want = reference_kept(docs, plan);
    ASSERT_GT(want.size(), 100u) << threshold;  // more than the 80 originals and short ones
    ASSERT_LT(want.size(), 260u) << threshold;  // and many of the 240 links dropped
    for (const size_t block : {docs.size(), size_t(7), size_t(1)}) {
      for (const int threads : {1, 3}) {
        NearDuplicates near(threshold, kUnk);
        std::vector<Document> kept;
        int64_t dropped = 0;
        for (size_t b = 0; b < docs.size(); b += block) {
          std::vector<Document> part(docs.begin() + b, docs.begin() + std::min(docs.size(), b + block));
          dropped += near.drop(&part, threads);
          kept.insert(kept.end(), part.begin(), part.end());
        }
        EXPECT_EQ(kept_positions(docs, kept), want) << threshold << " block " << block << " threads " << threads;
        EXPECT_EQ(dropped, int64_t(docs.size() - want.size()));
        EXPECT_GT(near.bytes(), 0u);
      }
    }
  }
}

TEST(NearDedup, DropsNearCopiesAndKeepsTheRest) {
  Ids ids{9};
  std::vector<std::vector<int32_t>> originals;
  for (int d = 0; d < 30; ++d) originals.push_back(random_tokens(ids, 300));
  std::vector<Document> docs;
  for (const auto& t : originals) docs.push_back(as_document(t, 20));
  auto one_changed = originals[0];
  one_changed[150] = 7;  // J = 291 / 301
  auto appended = originals[1];
  for (int i = 0; i < 20; ++i) appended.push_back(ids());  // J = 296 / 316
  auto inserted = originals[4], deleted = originals[5];
  inserted.insert(inserted.begin() + 3, 7);  // shifts every shingle after it
  deleted.erase(deleted.begin() + 3);
  auto half = originals[2];
  for (size_t i = 150; i < 300; ++i) half[i] = ids();  // J about 1/3
  docs.push_back(as_document(one_changed, 20));
  docs.push_back(as_document(originals[3], 7));  // the same tokens in other sentences
  docs.push_back(as_document(appended, 20));
  docs.push_back(as_document(half, 20));
  docs.push_back(as_document(inserted, 20));
  docs.push_back(as_document(deleted, 20));
  std::vector<int32_t> unk_x(300, kUnk), unk_y(300, kUnk);  // other texts, beyond the vocabulary
  for (size_t i = 1; i < 300; i += 2) unk_x[i] = ids() % 2 ? 1010 : 1012, unk_y[i] = ids() % 2 ? 1010 : 1012;
  docs.push_back(as_document(unk_x, 20));
  docs.push_back(as_document(unk_y, 20));
  docs.push_back(as_document(unk_x, 7));  // an [UNK] text broken into other sentences: a copy
  NearDuplicates near(0.8, kUnk);
  const std::vector<Document> all = docs;
  EXPECT_EQ(near.drop(&docs, 2), 6);
  ASSERT_EQ(docs.size(), 33u);
  EXPECT_TRUE(std::equal(docs.begin(), docs.begin() + 30, all.begin()));  // the originals, in order
  EXPECT_EQ(docs[30], all[33]);                                           // the half-changed one stays
  EXPECT_EQ(docs[31], all[36]);                                           // and both [UNK] texts
  EXPECT_EQ(docs[32], all[37]);
  // Against documents of earlier calls too.
  std::vector<Document> later{as_document(one_changed, 5), as_document(random_tokens(ids, 300), 20)};
  EXPECT_EQ(near.drop(&later, 1), 1);
  EXPECT_EQ(later.size(), 1u);
}

}  // namespace
}  // namespace lansbert
