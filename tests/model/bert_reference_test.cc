// BertModel<double>::forward against a naive fp64 BERT written here from the definition
// (Devlin et al. 2019; Hugging Face BertForPreTraining), with plain loops and no lansbert ops:
// the other model tests check the backward against whatever the forward computes, or one
// backend against another, so only this one catches a forward that is consistently wrong (the
// attention scale, where LayerNorm's eps sits, the GELU form, the pooler's tanh, the token NSP
// reads, the tied decoder, the padding mask). Parameters are random and far from BERT's
// initial values (biases and LayerNorm gamma/beta too), and layernorm_eps is 0.1, so that a
// misplaced or ignored eps and a dropped bias change the losses well beyond rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/model/bert_model.h"
#include "model_test_util.h"

namespace lansbert {
namespace {

constexpr int kB = 3, kS = 12, kP = 4;
using Mat = std::vector<double>;  // row-major

struct Reference {
  const BertConfig& c;
  BertModel<double>& m;
  double max_padding_weight = 0;  // the largest softmax weight a padding key got

  const double* p(const std::string& name) {
    const ParamEntry* e = m.table().find(name);
    EXPECT_NE(e, nullptr) << name;
    return m.param(*e);
  }
  // y = x W^T + b, W as [out, in] (torch.nn.Linear).
  Mat dense(const Mat& x, int rows, int in, const std::string& name, int out) {
    const double *w = p(name + ".weight"), *b = p(name + ".bias");
    Mat y(size_t(rows) * out);
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < out; ++o) {
        double s = b[o];
        for (int i = 0; i < in; ++i) s += x[size_t(r) * in + i] * w[size_t(o) * in + i];
        y[size_t(r) * out + o] = s;
      }
    return y;
  }
  // torch.nn.LayerNorm: biased variance, eps inside the square root.
  Mat layernorm(const Mat& x, int rows, const std::string& name) {
    const int H = c.hidden;
    const double *g = p(name + ".weight"), *b = p(name + ".bias");
    Mat y(x.size());
    for (int r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int h = 0; h < H; ++h) mean += x[size_t(r) * H + h] / H;
      for (int h = 0; h < H; ++h) var += (x[size_t(r) * H + h] - mean) * (x[size_t(r) * H + h] - mean) / H;
      for (int h = 0; h < H; ++h)
        y[size_t(r) * H + h] = (x[size_t(r) * H + h] - mean) / std::sqrt(var + double(c.layernorm_eps)) * g[h] + b[h];
    }
    return y;
  }
  Mat gelu(Mat x) {
    for (double& v : x)
      v = c.hidden_act == kern::GeluForm::kErf
              ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
              : 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    return x;
  }
  Mat add(Mat a, const Mat& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
  }

  // One sequence's encoder output [S, H].
  Mat encode(const Batch& bt, int b) {
    const int S = kS, H = c.hidden, A = c.heads, D = H / A;
    const double* word = p("bert.embeddings.word_embeddings.weight");
    const double* pos = p("bert.embeddings.position_embeddings.weight");
    const double* type = p("bert.embeddings.token_type_embeddings.weight");
    Mat x(size_t(S) * H);
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < H; ++h)
        x[size_t(s) * H + h] = word[size_t(bt.input_ids[b * S + s]) * H + h] + pos[size_t(s) * H + h] +
                               type[size_t(bt.segment_ids[b * S + s]) * H + h];
    x = layernorm(x, S, "bert.embeddings.LayerNorm");
    for (int l = 0; l < c.layers; ++l) {
      const std::string L = "bert.encoder.layer." + std::to_string(l);
      const Mat q = dense(x, S, H, L + ".attention.self.query", H), k = dense(x, S, H, L + ".attention.self.key", H),
                v = dense(x, S, H, L + ".attention.self.value", H);
      Mat ctx(size_t(S) * H, 0.0);
      for (int a = 0; a < A; ++a)
        for (int i = 0; i < S; ++i) {
          // Hugging Face's additive mask (-10000 on padding keys; lansbert drops them instead:
          // the same probabilities as long as exp(-10000 + ...) underflows, checked below).
          std::vector<double> w(S);
          for (int j = 0; j < S; ++j) {
            double s = 0;
            for (int d = 0; d < D; ++d) s += q[size_t(i) * H + a * D + d] * k[size_t(j) * H + a * D + d];
            w[j] = s / std::sqrt(double(D)) + (bt.input_mask[b * S + j] ? 0.0 : -10000.0);
          }
          const double mx = *std::max_element(w.begin(), w.end());
          double sum = 0;
          for (double& e : w) sum += (e = std::exp(e - mx));
          for (int j = 0; j < S; ++j) {
            w[j] /= sum;
            if (!bt.input_mask[b * S + j]) max_padding_weight = std::max(max_padding_weight, w[j]);
            for (int d = 0; d < D; ++d) ctx[size_t(i) * H + a * D + d] += w[j] * v[size_t(j) * H + a * D + d];
          }
        }
      const Mat h1 =
          layernorm(add(x, dense(ctx, S, H, L + ".attention.output.dense", H)), S, L + ".attention.output.LayerNorm");
      const Mat f = gelu(dense(h1, S, H, L + ".intermediate.dense", c.intermediate));
      x = layernorm(add(h1, dense(f, S, c.intermediate, L + ".output.dense", H)), S, L + ".output.LayerNorm");
    }
    return x;
  }

  // log_softmax of the MLM logits at each slot [B*P, V] (empty rows for unused slots) and of
  // the NSP logits [B, 2]: the losses follow from them.
  void heads(const Batch& bt, std::vector<Mat>* mlm, std::vector<Mat>* nsp) {
    const int H = c.hidden, V = c.vocab_size;
    const double *word = p("bert.embeddings.word_embeddings.weight"), *bias = p("cls.predictions.bias");
    auto log_softmax = [](Mat z) {
      const double mx = *std::max_element(z.begin(), z.end());
      double s = 0;
      for (double v : z) s += std::exp(v - mx);
      for (double& v : z) v -= mx + std::log(s);
      return z;
    };
    mlm->assign(size_t(kB) * kP, {});
    nsp->assign(kB, {});
    for (int b = 0; b < kB; ++b) {
      const Mat x = encode(bt, b);
      for (int s = 0; s < kP; ++s) {
        if (bt.masked_ids[b * kP + s] < 0) continue;
        const Mat row(x.begin() + size_t(bt.masked_positions[b * kP + s]) * H,
                      x.begin() + size_t(bt.masked_positions[b * kP + s] + 1) * H);
        const Mat t = layernorm(gelu(dense(row, 1, H, "cls.predictions.transform.dense", H)), 1,
                                "cls.predictions.transform.LayerNorm");
        Mat z(V);  // the decoder is the word embedding table, plus its own bias
        for (int v = 0; v < V; ++v) {
          z[v] = bias[v];
          for (int h = 0; h < H; ++h) z[v] += t[h] * word[size_t(v) * H + h];
        }
        (*mlm)[b * kP + s] = log_softmax(z);
      }
      Mat pooled = dense(Mat(x.begin(), x.begin() + H), 1, H, "bert.pooler.dense", H);  // [CLS], token 0
      for (double& v : pooled) v = std::tanh(v);
      (*nsp)[b] = log_softmax(dense(pooled, 1, H, "cls.seq_relationship", 2));
    }
  }
};

void check_against_reference(kern::GeluForm act) {
  BertConfig cfg;
  cfg.vocab_size = 50;
  cfg.hidden = 16;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.intermediate = 24;
  cfg.max_positions = 20;
  cfg.layernorm_eps = 0.1f;  // not BERT's 1e-12: where eps sits, and that it is read, both show
  cfg.hidden_act = act;
  ASSERT_TRUE(cfg.validate().is_ok());
  auto ops = cpu::make_ops<double>();
  BertModel<double> model(cfg, *ops, {kB, kS, kP});
  model.init_params(7);  // then overwritten: every tensor random and O(1)
  std::mt19937 g(11);
  std::normal_distribution<double> n(0.0, 1.0);
  for (const ParamEntry& e : model.table().entries())
    for (size_t i = 0; i < e.numel; ++i) {
      double& v = model.param(e)[i];
      if (e.role == ParamRole::kLayerNormGamma)
        v = 1.0 + 0.4 * n(g);
      else if (e.role == ParamRole::kWeight || e.role == ParamRole::kEmbedding)
        v = 0.4 * n(g);
      else
        v = 0.3 * n(g);  // biases and LayerNorm betas
    }
  // Row 1 is padded (8 tokens of 12); slot 3 of sequence 0 is unused (label -1).
  const Batch batch = testing::random_batch(kB, kS, kP, cfg.vocab_size, 5);
  // train = false: no dropout, though the config's rates are BERT's 0.1.
  const StepContext eval{false, 1, 0};
  const ForwardResult r = model.forward(batch, eval);

  Reference ref{cfg, model};
  std::vector<Mat> mlm, nsp;
  ref.heads(batch, &mlm, &nsp);
  EXPECT_LT(ref.max_padding_weight, 1e-300) << "the -10000 mask must give padding keys no weight";
  double mlm_sum = 0, nsp_sum = 0;
  int64_t mlm_count = 0, mlm_correct = 0, nsp_correct = 0;
  for (int k = 0; k < kB * kP; ++k) {
    if (mlm[k].empty()) continue;
    const int label = batch.masked_ids[k];
    mlm_sum -= mlm[k][label];
    ++mlm_count;
    mlm_correct += std::max_element(mlm[k].begin(), mlm[k].end()) - mlm[k].begin() == label;
  }
  for (int b = 0; b < kB; ++b) {
    nsp_sum -= nsp[b][batch.nsp_labels[b]];
    nsp_correct += (nsp[b][1] > nsp[b][0]) == (batch.nsp_labels[b] == 1);
  }
  const double mlm_loss = mlm_sum / mlm_count, nsp_loss = nsp_sum / kB;
  EXPECT_EQ(r.mlm_count, mlm_count);
  EXPECT_EQ(r.mlm_count, kB * kP - 1);
  EXPECT_EQ(r.nsp_count, kB);
  EXPECT_EQ(r.mlm_correct, mlm_correct);
  EXPECT_EQ(r.nsp_correct, nsp_correct);
  EXPECT_NEAR(r.mlm_loss, mlm_loss, 1e-10 * mlm_loss) << "MLM loss against the reference";
  EXPECT_NEAR(r.nsp_loss, nsp_loss, 1e-10 * nsp_loss) << "NSP loss against the reference";
  EXPECT_NEAR(r.total_loss, mlm_loss + nsp_loss, 1e-10 * (mlm_loss + nsp_loss));

  // Element-wise: the model does not expose its logits, but with one filled slot labelled v the
  // MLM loss is -log_softmax(logits)[v], so V forwards per slot read the whole row (the logits
  // up to the constant softmax ignores). Flipping one NSP label changes B * nsp_loss by that
  // sequence's log-probability difference.
  double worst = 0;
  for (int k = 0; k < kB * kP; ++k) {
    if (mlm[k].empty()) continue;
    Batch one = batch;
    std::fill(one.masked_ids.begin(), one.masked_ids.end(), Batch::kIgnore);
    for (int v = 0; v < cfg.vocab_size; ++v) {
      one.masked_ids[k] = v;
      const double got = -model.forward(one, eval).mlm_loss;
      worst = std::max(worst, std::abs(got - mlm[k][v]));
      ASSERT_NEAR(got, mlm[k][v], 1e-10 * (1 + std::abs(mlm[k][v])))
          << "MLM log-probability, slot " << k << " token " << v;
    }
  }
  for (int b = 0; b < kB; ++b) {
    Batch flip = batch;
    flip.nsp_labels[b] ^= 1;
    const double got = kB * (model.forward(flip, eval).nsp_loss - r.nsp_loss);
    const double want = nsp[b][batch.nsp_labels[b]] - nsp[b][1 - batch.nsp_labels[b]];
    worst = std::max(worst, std::abs(got - want));
    EXPECT_NEAR(got, want, 1e-10 * (1 + std::abs(want))) << "NSP log-probability difference, sequence " << b;
  }
  std::printf("mlm_loss %.15g (relative difference %.2g), nsp_loss %.15g (%.2g), worst log-prob difference %.2g\n",
              r.mlm_loss, r.mlm_loss / mlm_loss - 1, r.nsp_loss, r.nsp_loss / nsp_loss - 1, worst);
}

TEST(BertReference, ForwardMatchesNaiveFp64BertWithErfGelu) { check_against_reference(kern::GeluForm::kErf); }

TEST(BertReference, ForwardMatchesNaiveFp64BertWithTanhGelu) { check_against_reference(kern::GeluForm::kTanh); }

}  // namespace
}  // namespace lansbert
