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

#include "chunk_passes.h"
#include "lansbert/optim/trust_steps.h"
#include "rules.h"

namespace lansbert {
namespace {

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
  const size_t base_shared = shard_.begin;  // m and v hold the shard only
  partial_.assign(plan.chunks().size(), 0.0);
  for_each_chunk(plan, [&](size_t i, const Chunk& ch) {
    // Locals, not reads through the closure, so the element loop vectorises (see for_each_chunk).
    const AdamConsts<float> c = cs;
    const float wd = blocks_[ch.block].wd, clip_div = clip;
    const size_t base = base_shared;
    // A stack tile of directions keeps the element loop vectorisable; its squares are summed
    // in double in a fixed order.
    float u[kDirectionTile];
    double su = 0;
    for (size_t j0 = ch.begin; j0 < ch.end; j0 += kDirectionTile) {
      const size_t len = std::min(kDirectionTile, ch.end - j0);
      const float* __restrict g = buf.grads + j0;
      const float* __restrict p = buf.params + j0;
      float* __restrict m = buf.m + (j0 - base);
      float* __restrict v = buf.v + (j0 - base);
      for (size_t k = 0; k < len; ++k) {
        adam_moments(g[k] / clip_div, c, m[k], v[k]);
        u[k] = adam_direction(m[k], v[k], p[k], wd, c);
      }
      su += sum_squares(u, len);
    }
    partial_[i] = su;
  });
  finish_block_sums(plan, partial_, 1, shard_, &sums_);
}

void Lamb::apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs) {
  const size_t base_shared = shard_.begin;  // m and v hold the shard only
  for_each_chunk(plan, [&](size_t, const Chunk& ch) {
    // Locals, not reads through the closure or blocks_, so the loop vectorises.
    const AdamConsts<float> c = cs;
    const float step = blocks_[ch.block].step, wd = blocks_[ch.block].wd;
    const size_t base = base_shared;
    const size_t len = ch.end - ch.begin;
    const float* __restrict m = buf.m + (ch.begin - base);
    const float* __restrict v = buf.v + (ch.begin - base);
    float* __restrict p = buf.params + ch.begin;
    for (size_t k = 0; k < len; ++k) p[k] -= step * adam_direction(m[k], v[k], p[k], wd, c);
    write_half_copy(buf, ch);
  });
}

void Lamb::update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
                  UpdateStats* stats) {
  const ChunkPlan& plan = plan_for(table, &plan_, shard_.begin, shard_.end);
  const AdamConsts<float> c = adam_consts(config_, t);
  const size_t nb = plan.blocks();
  blocks_.resize(nb);

  const double G = gradient_norms(plan, buf, /*want_params=*/true, shard_, &partial_, &sums_);
  const double clip = clip_divisor(G, config_.max_grad_norm);
  for (size_t b = 0; b < nb; ++b) {
    blocks_[b].wd = static_cast<float>(config_.decay_for(table[b].role));
    blocks_[b].param_norm = std::sqrt(sums_[2 * b + 1]);
  }

  moments_pass(plan, buf, c, static_cast<float>(clip));
  lamb_step_sizes(
      config_, lr, nb, sums_.data(), [&](size_t b) { return blocks_[b].param_norm; }, [&](size_t b) { return blocks_[b].wd; },
      [&](size_t b, float step) { blocks_[b].step = step; }, stats);

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
  const double G = gradient_norms(plan, buf, /*want_params=*/false, shard_, &partial_, &sums_);
  const float clip = static_cast<float>(clip_divisor(G, config_.max_grad_norm));
  wd_.resize(plan.blocks());
  for (size_t b = 0; b < plan.blocks(); ++b) {
    wd_[b] = static_cast<float>(config_.decay_for(table[b].role));
  }
  const float step_shared = static_cast<float>(lr);
  const size_t base_shared = shard_.begin;  // m and v hold the shard only
  for_each_chunk(plan, [&](size_t, const Chunk& ch) {
    // Locals, not reads through the closure, so the element loop vectorises.
    const AdamConsts<float> c = cs;
    const float wd = wd_[ch.block], div = clip, step = step_shared;
    const size_t base = base_shared;
    const size_t len = ch.end - ch.begin;
    const float* __restrict g = buf.grads + ch.begin;
    float* __restrict p = buf.params + ch.begin;
    float* __restrict m = buf.m + (ch.begin - base);
    float* __restrict v = buf.v + (ch.begin - base);
    for (size_t k = 0; k < len; ++k) {
      adam_moments(g[k] / div, c, m[k], v[k]);
      p[k] -= step * adam_direction(m[k], v[k], p[k], wd, c);
    }
    write_half_copy(buf, ch);
  });
  if (stats) {
    stats->grad_norm = G;
    stats->clip_divisor = clip;
    stats->trust_ratio.clear();
    stats->trust_ratio_grad.clear();
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
