// Sequence packing (data/packing.h): the rows first-fit decreasing fills, what it refuses (the
// batch left as it was), and what packing rests on: a packed micro-batch gives the unpacked
// one's losses and gradients, with the hand-written attention and the flash one, in fp64 (to
// 1e-11) and fp32 (1e-5), without dropout.
#include "lansbert/data/packing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/model/bert_model.h"
#include "../model/model_test_util.h"

namespace lansbert {
namespace {

using testing::batch_of_lengths;

// Sequence i's tokens as packing left them: the run of its number from its start.
std::vector<int32_t> tokens_of(const Batch& b, int i, std::vector<int32_t>* segments = nullptr) {
  const size_t at = size_t(b.sequence_row[i]) * b.seq_len + b.sequence_start[i];
  std::vector<int32_t> ids;
  for (size_t t = at; t < size_t(b.sequence_row[i] + 1) * b.seq_len && b.input_mask[t] == b.input_mask[at]; ++t) {
    ids.push_back(b.input_ids[t]);
    if (segments) segments->push_back(b.segment_ids[t]);
  }
  return ids;
}

TEST(Packing, FirstFitDecreasingLayout) {
  // Lengths 5, 9, 3, 7, 4 into rows of 12, longest first: 9 opens row 0, 7 row 1, 5 joins row 1
  // (row 0 has 3 left), 4 opens row 2, 3 fills row 0.
  const Batch in = batch_of_lengths({5, 9, 3, 7, 4}, 12, 2, 1000, 1);
  Batch b = in;
  ASSERT_TRUE(pack_batch(&b).is_ok());
  EXPECT_TRUE(b.packed());
  EXPECT_EQ(b.batch, 5);
  EXPECT_EQ(b.rows, 3);
  EXPECT_EQ(b.sequence_row, (std::vector<int32_t>{1, 0, 0, 1, 2}));
  EXPECT_EQ(b.sequence_start, (std::vector<int32_t>{7, 0, 9, 0, 0}));
  const std::vector<int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,   // 9 then 3
                                     1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,   // 7 then 5
                                     1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};  // 4, padding
  EXPECT_EQ(b.input_mask, mask);
  ASSERT_EQ(b.input_ids.size(), 36u);
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> seg;
    const std::vector<int32_t> ids = tokens_of(b, i, &seg);
    const int len = int(ids.size());
    EXPECT_EQ(ids, std::vector<int32_t>(in.input_ids.begin() + 12 * i, in.input_ids.begin() + 12 * i + len)) << i;
    EXPECT_EQ(seg, std::vector<int32_t>(in.segment_ids.begin() + 12 * i, in.segment_ids.begin() + 12 * i + len)) << i;
  }
  for (size_t t = 28; t < 36; ++t) EXPECT_EQ(b.input_ids[t], 0);
  // The per-sequence fields are the loader's, untouched.
  EXPECT_EQ(b.masked_positions, in.masked_positions);
  EXPECT_EQ(b.masked_ids, in.masked_ids);
  EXPECT_EQ(b.nsp_labels, in.nsp_labels);
  // Full sequences cannot share: one row each.
  Batch full = batch_of_lengths({12, 12}, 12, 2, 1000, 2);
  ASSERT_TRUE(pack_batch(&full).is_ok());
  EXPECT_EQ(full.rows, 2);
}

TEST(Packing, RefusesWhatItCannotPackAndLeavesTheBatch) {
  const Batch in = batch_of_lengths({5, 6}, 8, 2, 1000, 3);
  auto refused = [&](Batch b, const std::string& what) {
    const Batch before = b;
    const Status st = pack_batch(&b);
    EXPECT_FALSE(st.is_ok()) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    EXPECT_EQ(b.input_mask, before.input_mask);
    EXPECT_EQ(b.rows, before.rows);
    EXPECT_FALSE(b.packed());
  };
  Batch hole = in;
  hole.input_mask[8 + 7] = 1;  // sequence 1: a token after padding
  refused(hole, "sequence 1 of the micro-batch: input_mask is 1 at position 7, not ones then zeros");
  Batch two = in;
  two.input_mask[2] = 2;
  refused(two, "sequence 0 of the micro-batch: input_mask is 2 at position 2");
  Batch empty = in;
  std::fill(empty.input_mask.begin() + 8, empty.input_mask.end(), 0);
  refused(empty, "sequence 1 of the micro-batch: input_mask holds no token");
  Batch past = in;
  past.masked_positions[2] = 6;  // sequence 1's first slot, at its padding
  refused(past, "sequence 1 of the micro-batch: masked slot 0 is at position 6, past its 6 tokens");
  Batch twice = in;
  ASSERT_TRUE(pack_batch(&twice).is_ok());
  EXPECT_FALSE(pack_batch(&twice).is_ok());
  // An unused slot (label ignored) may point anywhere.
  Batch unused = in;
  unused.masked_positions[1] = 7;  // sequence 0's last slot, unused
  EXPECT_TRUE(pack_batch(&unused).is_ok());
}

struct Step {
  ForwardResult r;
  std::vector<double> grads;
};

template <typename T>
Step train_step(const BertConfig& cfg, AttentionMode mode, const Batch& batch, int B, int S, int P) {
  auto ops = cpu::make_ops<T>(GemmMath::kFp32, true, mode);
  BertModel<T> m(cfg, *ops, {B, S, P});
  m.init_params(23);
  m.zero_grads();
  Step out;
  out.r = m.forward(batch, StepContext{true, 5, 1});
  m.backward(T(1), [](size_t, size_t) {});
  out.grads.assign(m.grads(), m.grads() + m.table().total_elements());
  return out;
}

double rel_norm_diff(const std::vector<double>& got, const std::vector<double>& ref) {
  double d = 0, r = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    d += (got[i] - ref[i]) * (got[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(d / r);
}

template <typename T>
void expect_packing_changes_nothing(AttentionMode mode, double tol) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.layers = 2;
  cfg.hidden_dropout = cfg.attention_dropout = 0;  // dropout masks follow positions
  cfg.init_std = 0.1f;  // attention far from uniform: a leak between sequences would show
  const int S = 40, P = 4;
  // Two key tiles of the flash attention (32) per row, sequences crossing tile boundaries.
  Batch unpacked = batch_of_lengths({21, 9, 33, 6, 14, 3, 40, 17}, S, P, cfg.vocab_size, 7);
  unpacked.masked_positions[P - 1] = S - 1;  // sequence 0's unused slot, past its tokens
  Batch packed = unpacked;
  ASSERT_TRUE(pack_batch(&packed).is_ok());
  ASSERT_LT(packed.rows, unpacked.rows);
  const int B = unpacked.batch;
  const Step a = train_step<T>(cfg, mode, unpacked, B, S, P), b = train_step<T>(cfg, mode, packed, B, S, P);
  EXPECT_NEAR(b.r.mlm_loss, a.r.mlm_loss, tol * a.r.mlm_loss);
  EXPECT_NEAR(b.r.nsp_loss, a.r.nsp_loss, tol * a.r.nsp_loss);
  EXPECT_EQ(b.r.mlm_count, a.r.mlm_count);
  EXPECT_EQ(b.r.mlm_correct, a.r.mlm_correct);
  EXPECT_EQ(b.r.nsp_count, a.r.nsp_count);
  EXPECT_EQ(b.r.nsp_correct, a.r.nsp_correct);
  const double g = rel_norm_diff(b.grads, a.grads);
  std::printf("%s %s: %d sequences in %d rows: loss %.17g vs %.17g, gradients rel %.2e\n",
              sizeof(T) == 8 ? "fp64" : "fp32", attention_mode_name(mode), B, packed.rows, b.r.total_loss,
              a.r.total_loss, g);
  EXPECT_LT(g, tol);
}

TEST(Packing, PackedBatchGivesTheUnpackedLossAndGradients) {
  for (AttentionMode mode : {AttentionMode::kNative, AttentionMode::kFlash}) {
    SCOPED_TRACE(attention_mode_name(mode));
    expect_packing_changes_nothing<double>(mode, 1e-11);
    expect_packing_changes_nothing<float>(mode, 1e-5);
  }
}

}  // namespace
}  // namespace lansbert

namespace lansbert {
namespace {

// Packed micro-batches have varying row counts, and the 16-bit GEMMs keep cast operands
// between calls (keyed by address): a micro-batch after a larger one must give the bits it
// gives after a fresh start, its loss and its gradients.
TEST(Packing, AMicroBatchAfterALargerOneGivesTheSameBits) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.layers = 2;
  const int S = 40, P = 4, B = 8;
  Batch large = batch_of_lengths({38, 35, 33, 30, 28, 25, 22, 40}, S, P, cfg.vocab_size, 11);
  Batch small = batch_of_lengths({21, 9, 12, 6, 14, 3, 30, 17}, S, P, cfg.vocab_size, 12);
  ASSERT_TRUE(pack_batch(&large).is_ok());
  ASSERT_TRUE(pack_batch(&small).is_ok());
  ASSERT_GT(large.rows, small.rows);
  for (GemmMath math : {GemmMath::kFp32, GemmMath::kBf16})
    for (AttentionMode mode : {AttentionMode::kNative, AttentionMode::kFlash}) {
      SCOPED_TRACE(std::string(gemm_math_name(math)) + " " + attention_mode_name(mode));
      auto run = [&](bool first_large) {
        auto ops = cpu::make_ops<float>(math, true, mode);
        BertModel<float> m(cfg, *ops, {B, S, P});
        m.init_params(29);
        if (first_large) {
          m.zero_grads();
          m.forward(large, StepContext{true, 5, 1});
          m.backward(1.0f, [](size_t, size_t) {});
        }
        m.zero_grads();
        Step out;
        out.r = m.forward(small, StepContext{true, 5, 2});
        m.backward(1.0f, [](size_t, size_t) {});
        out.grads.assign(m.grads(), m.grads() + m.table().total_elements());
        return out;
      };
      const Step fresh = run(false), after = run(true);
      EXPECT_EQ(after.r.total_loss, fresh.r.total_loss);
      EXPECT_EQ(after.grads, fresh.grads);
    }
}

}  // namespace
}  // namespace lansbert
