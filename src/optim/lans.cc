// LANS (Zheng, Lin et al. 2020) on the CPU: three passes over the chunk plan.
//   1. ||g||, ||p|| per block (before anything is modified).
//   2. gh = g/(||g||+eps) (g itself when ||g|| = 0), new m and v, and ||u_m||, ||u_g||
//      of the directions built from the new moments and the pre-update p.
//   3. The same directions recomputed (same inline math, so the same bits) and applied with
//      both trust ratios: p -= lr*b1*r_m*u_m + lr*(1-b1)*r_g*u_g.
// Recomputing u in pass 3 costs arithmetic but no extra buffer, which is what a 110M-element
// model can afford. The formulas are in docs/optimizers.md.
#include <algorithm>
#include <cmath>
#include <vector>

#include "chunk_passes.h"
#include "lansbert/optim/trust_steps.h"
#include "rules.h"

namespace lansbert {
namespace {

class Lans final : public Optimizer {
 public:
  explicit Lans(OptimizerConfig c) : Optimizer(std::move(c)) {}
  void update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
              UpdateStats* stats) override;

 private:
  // Per-block factors of pass 2 and 3.
  struct Block {
    float g_scale;  // 1/(||g||+eps), or 1 for an all-zero gradient
    float wd;
    double param_norm;
    float step_m;  // lr*b1*r_m
    float step_g;  // lr*(1-b1)*r_g
  };
  void moments_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs);
  void apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs);

  std::unique_ptr<ChunkPlan> plan_;
  std::vector<double> partial_, sums_;
  std::vector<Block> blocks_;
};

void Lans::moments_pass(const ChunkPlan& plan, const FlatBuffers& buf,
                        const AdamConsts<float>& cs) {
  const size_t base_shared = shard_.begin;  // m and v hold the shard only
  partial_.assign(plan.chunks().size() * 2, 0.0);
  for_each_chunk(plan, [&](size_t i, const Chunk& ch) {
    // Constants and per-block factors as locals: the compiler cannot prove that the closure
    // or blocks_ are not written through the element pointers, and would not vectorise.
    const AdamConsts<float> c = cs;
    const float gs = blocks_[ch.block].g_scale, wd = blocks_[ch.block].wd;
    const size_t base = base_shared;
    // Directions go to a small stack tile so the element loop vectorises; the tile's squares
    // are then summed in double in a fixed order, independent of threads.
    float um[kDirectionTile], ug[kDirectionTile];
    double sm = 0, sg = 0;
    for (size_t j0 = ch.begin; j0 < ch.end; j0 += kDirectionTile) {
      const size_t len = std::min(kDirectionTile, ch.end - j0);
      const float* __restrict g = buf.grads + j0;
      const float* __restrict p = buf.params + j0;
      float* __restrict m = buf.m + (j0 - base);
      float* __restrict v = buf.v + (j0 - base);
      for (size_t k = 0; k < len; ++k) {
        const float gh = g[k] * gs;
        adam_moments(gh, c, m[k], v[k]);
        const LansDirections<float> u = lans_directions(gh, m[k], v[k], p[k], wd, c);
        um[k] = u.um;
        ug[k] = u.ug;
      }
      add_sum_squares(um, ug, len, &sm, &sg);
    }
    partial_[2 * i] = sm;
    partial_[2 * i + 1] = sg;
  });
  finish_block_sums(plan, partial_, 2, shard_, &sums_);
}

void Lans::apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs) {
  const size_t base_shared = shard_.begin;  // m and v hold the shard only
  for_each_chunk(plan, [&](size_t, const Chunk& ch) {
    const AdamConsts<float> c = cs;  // locals, not closure reads, so the loop vectorises
    const size_t base = base_shared;
    const Block& b = blocks_[ch.block];
    const float gs = b.g_scale, wd = b.wd, step_m = b.step_m, step_g = b.step_g;
    const size_t len = ch.end - ch.begin;
    const float* __restrict g = buf.grads + ch.begin;
    const float* __restrict m = buf.m + (ch.begin - base);
    const float* __restrict v = buf.v + (ch.begin - base);
    float* __restrict p = buf.params + ch.begin;
    for (size_t k = 0; k < len; ++k) {
      const LansDirections<float> u = lans_directions(g[k] * gs, m[k], v[k], p[k], wd, c);
      p[k] = lans_apply(p[k], u, step_m, step_g);
    }
    write_half_copy(buf, ch);
  });
}

void Lans::update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
                  UpdateStats* stats) {
  const ChunkPlan& plan = plan_for(table, &plan_, shard_.begin, shard_.end);
  const AdamConsts<float> c = adam_consts(config_, t);
  const size_t nb = plan.blocks();
  blocks_.resize(nb);

  const double G = gradient_norms(plan, buf, /*want_params=*/true, shard_, &partial_, &sums_);
  for (size_t b = 0; b < nb; ++b) {
    const double gn = std::sqrt(sums_[2 * b]);
    blocks_[b].g_scale = gn != 0 ? static_cast<float>(1.0 / (gn + config_.eps)) : 1.0f;
    blocks_[b].wd = static_cast<float>(config_.decay_for(table[b].role));
    blocks_[b].param_norm = std::sqrt(sums_[2 * b + 1]);
  }

  moments_pass(plan, buf, c);
  lans_step_sizes(
      config_, lr, nb, sums_.data(), [&](size_t b) { return blocks_[b].param_norm; },
      [&](size_t b, float step_m, float step_g) {
        blocks_[b].step_m = step_m;
        blocks_[b].step_g = step_g;
      },
      stats);

  apply_pass(plan, buf, c);
  if (stats) {
    stats->grad_norm = G;
    stats->clip_divisor = 1.0;
  }
}

}  // namespace

std::unique_ptr<Optimizer> make_lans(const OptimizerConfig& c) {
  return std::make_unique<Lans>(c);
}

}  // namespace lansbert
