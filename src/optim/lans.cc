// LANS (Zheng, Lin et al. 2020) on the CPU: three passes over the chunk plan.
//   1. ||g||, ||p|| per block (before anything is modified).
//   2. gh = g/(||g||+eps) (g itself when ||g|| = 0), new m and v, and ||u_m||, ||u_g||
//      of the directions built from the new moments and the pre-update p.
//   3. The same directions recomputed (same inline math, so the same bits) and applied with
//      both trust ratios: p -= lr*b1*r_m*u_m + lr*(1-b1)*r_g*u_g.
// Recomputing u in pass 3 costs arithmetic but no extra buffer, which is what a 110M-element
// model can afford. The formulas are in docs/optimizers.md.
#include <cmath>
#include <vector>

#include "chunk_plan.h"
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
  void norms_pass(const ChunkPlan& plan, const FlatBuffers& buf);
  void moments_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& c);
  void apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& c);

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
    sum_squares2(buf.grads + ch.begin, buf.params + ch.begin, ch.end - ch.begin,
                 &partial_[2 * i], &partial_[2 * i + 1]);
  }
  plan.sum_by_block(partial_, 2, &sums_);
}

void Lans::moments_pass(const ChunkPlan& plan, const FlatBuffers& buf,
                        const AdamConsts<float>& c) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    const Block& b = blocks_[ch.block];
    // Four interleaved accumulators per norm: a fixed order, and no single add chain.
    double sm[4] = {0, 0, 0, 0}, sg[4] = {0, 0, 0, 0};
    for (size_t j0 = ch.begin; j0 < ch.end; j0 += 4) {
      for (size_t k = 0; k < 4 && j0 + k < ch.end; ++k) {
        const size_t j = j0 + k;
        const float gh = buf.grads[j] * b.g_scale;
        adam_moments(gh, c, buf.m[j], buf.v[j]);
        const LansDirections<float> u = lans_directions(gh, buf.m[j], buf.v[j], buf.params[j], b.wd, c);
        sm[k] += static_cast<double>(u.um) * u.um;
        sg[k] += static_cast<double>(u.ug) * u.ug;
      }
    }
    partial_[2 * i] = (sm[0] + sm[1]) + (sm[2] + sm[3]);
    partial_[2 * i + 1] = (sg[0] + sg[1]) + (sg[2] + sg[3]);
  }
  plan.sum_by_block(partial_, 2, &sums_);
}

void Lans::apply_pass(const ChunkPlan& plan, const FlatBuffers& buf, const AdamConsts<float>& c) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    const Chunk& ch = chunks[i];
    const Block& b = blocks_[ch.block];
    for (size_t j = ch.begin; j < ch.end; ++j) {
      const float gh = buf.grads[j] * b.g_scale;
      const LansDirections<float> u = lans_directions(gh, buf.m[j], buf.v[j], buf.params[j], b.wd, c);
      buf.params[j] = lans_apply(buf.params[j], u, b.step_m, b.step_g);
    }
  }
}

void Lans::update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
                  UpdateStats* stats) {
  const ChunkPlan& plan = plan_for(table, &plan_);
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
