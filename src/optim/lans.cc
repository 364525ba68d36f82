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

#include "chunk_plan.h"
#include "rules.h"

namespace lansbert {
namespace {

constexpr size_t kTile = 256;  // elements per stack tile of directions (2 KiB)

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
  void norms_pass(const ChunkPlan& plan, const FlatBuffers& buf);
  void moments_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs);
  void apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs);

  std::unique_ptr<ChunkPlan> plan_;
  std::vector<double> partial_, sums_;
  std::vector<Block> blocks_;
};

void Lans::norms_pass(const ChunkPlan& plan, const FlatBuffers& buf) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
  partial_.assign(chunks.size() * 2, 0.0);
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    sum_squares2(buf.grads + ch.begin, buf.params + ch.begin, ch.end - ch.begin, &partial_[2 * i],
                 &partial_[2 * i + 1]);
  }
  plan.sum_by_block(partial_, 2, &sums_);
  reduce_sums(&sums_);
}

void Lans::moments_pass(const ChunkPlan& plan, const FlatBuffers& buf,
                        const AdamConsts<float>& cs) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
  const size_t base = shard_.begin;  // m and v hold the shard only
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    const AdamConsts<float> c = cs;  // a local: OpenMP shares cs by pointer, which blocks SIMD
    // Per-block factors as locals: the compiler cannot prove blocks_ is not written through
    // the element pointers, and would not vectorise otherwise.
    const float gs = blocks_[ch.block].g_scale, wd = blocks_[ch.block].wd;
    // Directions go to a small tile so the element loop vectorises; the tile's squares are
    // then summed in double in a fixed order (sum_squares2), independent of threads.
    float um[kTile], ug[kTile];
    double sm = 0, sg = 0;
    for (size_t j0 = ch.begin; j0 < ch.end; j0 += kTile) {
      const size_t len = std::min(kTile, ch.end - j0);
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
      double a, e;
      sum_squares2(um, ug, len, &a, &e);
      sm += a;
      sg += e;
    }
    partial_[2 * i] = sm;
    partial_[2 * i + 1] = sg;
  }
  plan.sum_by_block(partial_, 2, &sums_);
  reduce_sums(&sums_);
}

void Lans::apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& cs) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
  const size_t base = shard_.begin;  // m and v hold the shard only
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    const AdamConsts<float> c = cs;  // a local: OpenMP shares cs by pointer, which blocks SIMD
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
  }
}

void Lans::update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
                  UpdateStats* stats) {
  const ChunkPlan& plan = plan_for(table, &plan_, shard_.begin, shard_.end);
  const AdamConsts<float> c = adam_consts(config_, t);
  const size_t nb = plan.blocks();
  blocks_.resize(nb);

  norms_pass(plan, buf);
  double g2 = 0;
  for (size_t b = 0; b < nb; ++b) {
    const double gn = std::sqrt(sums_[2 * b]);
    g2 += sums_[2 * b];
    blocks_[b].g_scale = gn != 0 ? static_cast<float>(1.0 / (gn + config_.eps)) : 1.0f;
    blocks_[b].wd = static_cast<float>(config_.decay_for(table[b].role));
    blocks_[b].param_norm = std::sqrt(sums_[2 * b + 1]);
  }

  moments_pass(plan, buf, c);
  for (size_t b = 0; b < nb; ++b) {
    const double r_m = trust_ratio(blocks_[b].param_norm, std::sqrt(sums_[2 * b]));
    const double r_g = trust_ratio(blocks_[b].param_norm, std::sqrt(sums_[2 * b + 1]));
    blocks_[b].step_m = static_cast<float>(lr * config_.beta1 * r_m);
    blocks_[b].step_g = static_cast<float>(lr * (1.0 - config_.beta1) * r_g);
  }

  apply_pass(plan, buf, c);
  if (stats) {
    stats->grad_norm = std::sqrt(g2);
    stats->clip_divisor = 1.0;
  }
}

}  // namespace

std::unique_ptr<Optimizer> make_lans(const OptimizerConfig& c) {
  return std::make_unique<Lans>(c);
}

}  // namespace lansbert
