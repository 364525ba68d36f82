// LAMB as NVIDIA apex FusedLAMB computes it, and AdamW, on the CPU. Both start from the
// global gradient norm G (summed over blocks in table order) and divide every gradient by
// G/max_grad_norm when G exceeds max_grad_norm. LAMB then needs per-block ||p|| and ||u||:
//   1. ||g||^2 and ||p||^2 per block (before anything is modified); G.
//   2. new m and v from g/clip; ||u|| of u = mhat/(sqrt(vhat)+eps) + wd*p.
//   3. u recomputed (same inline math) and p -= lr*r*u, with r = ||p||/||u|| on blocks with
//      wd != 0 (apex) or on every block (NVLAMB, trust_ratio_on_excluded), else r = 1.
// AdamW is pass 1 (g only) and one fused pass: p -= lr*u.
#include <algorithm>
#include <cmath>
#include <vector>

#include "chunk_plan.h"
#include "rules.h"

namespace lansbert {
namespace {

constexpr size_t kTile = 256;  // elements per stack tile of directions (1 KiB)

// Pass 1 of both rules: per-block sums of g^2 (and p^2 when want_params) into *sums,
// K = 2 values per block when want_params, else 1, summed over ranks when sharded. Returns G.
double gradient_norms(const ChunkPlan& plan, const FlatBuffers& buf, bool want_params,
                      const Optimizer& opt, std::vector<double>* partial,
                      std::vector<double>* sums) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
  const int K = want_params ? 2 : 1;
  partial->assign(chunks.size() * K, 0.0);
  double* out = partial->data();
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    if (want_params) {
      sum_squares2(buf.grads + ch.begin, buf.params + ch.begin, ch.end - ch.begin, &out[2 * i],
                   &out[2 * i + 1]);
    } else {
      out[i] = sum_squares(buf.grads + ch.begin, ch.end - ch.begin);
    }
  }
  plan.sum_by_block(*partial, K, sums);
  if (opt.shard().reduce_sums) opt.shard().reduce_sums(sums->data(), sums->size());
  double g2 = 0;
  for (size_t b = 0; b < plan.blocks(); ++b) g2 += (*sums)[b * K];
  return std::sqrt(g2);
}

class Lamb final : public Optimizer {
 public:
  explicit Lamb(OptimizerConfig c) : Optimizer(std::move(c)) {}
  void update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
              UpdateStats* stats) override;

 private:
  struct Block {
    float wd;
    double param_norm;
    float step;  // lr * r
  };
  void moments_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs,
                    float clip);
  void apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs);

  std::unique_ptr<ChunkPlan> plan_;
  std::vector<double> partial_, sums_;
  std::vector<Block> blocks_;
};

void Lamb::moments_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs,
                        float clip) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
  partial_.assign(chunks.size(), 0.0);
  const size_t base = shard_.begin;  // m and v hold the shard only
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    const AdamConsts<float> c = cs;  // a local: OpenMP shares cs by pointer, which blocks SIMD
    const float wd = blocks_[ch.block].wd;
    // A stack tile of directions keeps the element loop vectorisable; its squares are summed
    // in double in a fixed order.
    float u[kTile];
    double su = 0;
    for (size_t j0 = ch.begin; j0 < ch.end; j0 += kTile) {
      const size_t len = std::min(kTile, ch.end - j0);
      const float* __restrict g = buf.grads + j0;
      const float* __restrict p = buf.params + j0;
      float* __restrict m = buf.m + (j0 - base);
      float* __restrict v = buf.v + (j0 - base);
      for (size_t k = 0; k < len; ++k) {
        adam_moments(g[k] / clip, c, m[k], v[k]);
        u[k] = adam_direction(m[k], v[k], p[k], wd, c);
      }
      su += sum_squares(u, len);
    }
    partial_[i] = su;
  }
  plan.sum_by_block(partial_, 1, &sums_);
  reduce_sums(&sums_);
}

void Lamb::apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
  const size_t base = shard_.begin;  // m and v hold the shard only
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    const AdamConsts<float> c = cs;  // a local: OpenMP shares cs by pointer, which blocks SIMD
    // Locals, not blocks_ reads, so the loop vectorises.
    const float step = blocks_[ch.block].step, wd = blocks_[ch.block].wd;
    const size_t len = ch.end - ch.begin;
    const float* __restrict m = buf.m + (ch.begin - base);
    const float* __restrict v = buf.v + (ch.begin - base);
    float* __restrict p = buf.params + ch.begin;
    for (size_t k = 0; k < len; ++k) p[k] -= step * adam_direction(m[k], v[k], p[k], wd, c);
  }
}

void Lamb::update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
                  UpdateStats* stats) {
  const ChunkPlan& plan = plan_for(table, &plan_, shard_.begin, shard_.end);
  const AdamConsts<float> c = adam_consts(config_, t);
  const size_t nb = plan.blocks();
  blocks_.resize(nb);

  const double G = gradient_norms(plan, buf, /*want_params=*/true, *this, &partial_, &sums_);
  const double clip = clip_divisor(G, config_.max_grad_norm);
  for (size_t b = 0; b < nb; ++b) {
    blocks_[b].wd = static_cast<float>(config_.decay_for(table[b].role));
    blocks_[b].param_norm = std::sqrt(sums_[2 * b + 1]);
  }

  moments_pass(plan, buf, c, static_cast<float>(clip));
  for (size_t b = 0; b < nb; ++b) {
    const bool use_ratio = blocks_[b].wd != 0 || config_.trust_ratio_on_excluded;
    const double r = use_ratio ? trust_ratio(blocks_[b].param_norm, std::sqrt(sums_[b])) : 1.0;
    blocks_[b].step = static_cast<float>(lr * r);
  }

  apply_pass(plan, buf, c);
  if (stats) {
    stats->grad_norm = G;
    stats->clip_divisor = clip;
  }
}

class AdamW final : public Optimizer {
 public:
  explicit AdamW(OptimizerConfig c) : Optimizer(std::move(c)) {}
  void update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
              UpdateStats* stats) override;

 private:
  std::unique_ptr<ChunkPlan> plan_;
  std::vector<double> partial_, sums_;
  std::vector<float> wd_;
};

void AdamW::update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
                   UpdateStats* stats) {
  const ChunkPlan& plan = plan_for(table, &plan_, shard_.begin, shard_.end);
  const AdamConsts<float> cs = adam_consts(config_, t);
  const double G = gradient_norms(plan, buf, /*want_params=*/false, *this, &partial_, &sums_);
  const float clip = static_cast<float>(clip_divisor(G, config_.max_grad_norm));
  wd_.resize(plan.blocks());
  for (size_t b = 0; b < plan.blocks(); ++b) {
    wd_[b] = static_cast<float>(config_.decay_for(table[b].role));
  }
  const float step = static_cast<float>(lr);
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
  const size_t base = shard_.begin;  // m and v hold the shard only
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    const AdamConsts<float> c = cs;  // a local: OpenMP shares cs by pointer, which blocks SIMD
    const float wd = wd_[ch.block];
    const size_t len = ch.end - ch.begin;
    const float* __restrict g = buf.grads + ch.begin;
    float* __restrict p = buf.params + ch.begin;
    float* __restrict m = buf.m + (ch.begin - base);
    float* __restrict v = buf.v + (ch.begin - base);
    for (size_t k = 0; k < len; ++k) {
      adam_moments(g[k] / clip, c, m[k], v[k]);
      p[k] -= step * adam_direction(m[k], v[k], p[k], wd, c);
    }
  }
  if (stats) {
    stats->grad_norm = G;
    stats->clip_divisor = clip;
  }
}

}  // namespace

std::unique_ptr<Optimizer> make_lamb(const OptimizerConfig& c) {
  return std::make_unique<Lamb>(c);
}
std::unique_ptr<Optimizer> make_adamw(const OptimizerConfig& c) {
  return std::make_unique<AdamW>(c);
}

}  // namespace lansbert
