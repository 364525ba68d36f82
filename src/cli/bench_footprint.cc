// `lansbert bench`'s memory estimate, --batch 0's probe and the refusal of a --batch that
// cannot fit (bench_footprint.h).
#include "bench_footprint.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#ifdef LANSBERT_HAVE_CUDA
#include "cuda_device_backend.h"
#endif

namespace lansbert::cli {

namespace {
// The micro-batches the probe and the refusal's suggestion try, largest first.
std::vector<int> candidate_batches() {
  std::vector<int> c;
  for (int b = 4096; b >= 2; b /= 2) {
    c.push_back(b);
    if (b >= 4) c.push_back(b / 2 + b / 4);
  }
  c.push_back(1);
  return c;
}

double gib(double bytes) { return bytes / 1073741824.0; }
}  // namespace

// The fused attention adds its bf16 staging (8 tensors of B*S*H), fp32 dQ accumulator and,
// with attention dropout, its bf16 keep mask of B*A*S*S.
size_t bench_bytes_for(const BertConfig& cfg, int B, int S, int P, const FootprintOptions& f) {
  const size_t params = make_bert_param_table(cfg).total_elements();
  const size_t flat = params * sizeof(float) * (f.with_moments ? 4 : 2);
  const ModelLimits limits{B, S, P, f.recompute, f.fused_attention, f.half_activations};
  // cuDNN's attention reads q/k/v and ctx in fp32; the others only as 16-bit copies where kept.
  const OutputStorage storage{f.cast_operands && f.reuse, !f.cudnn_staging, f.flash_runs};
  const size_t act = BertModel<float>::activation_bytes_for(cfg, limits, storage);
  const size_t keep_mask = cfg.attention_dropout > 0 ? size_t(B) * cfg.heads * S * S * 2 : 0;
  const size_t fused = f.cudnn_staging ? size_t(B) * S * cfg.hidden * (8 * 2 + 4) + keep_mask : 0;
  // 16-bit GEMMs with our cast pass: the kept weights' copy, the layers' kept activations
  // (BertModel::kept_copy_bytes_for), and three operand workspaces (A, B, the held dY) sized
  // for the largest operand: FFN activations, attention probabilities (none with the flash
  // attention) or the MLM logits.
  const size_t N = size_t(B) * S;
  const size_t largest = std::max({N * cfg.intermediate, f.flash_runs ? 0 : size_t(B) * cfg.heads * S * S,
                                   size_t(B) * P * cfg.vocab_size});
  const size_t kept =
      f.reuse ? 2 * params + BertModel<float>::kept_copy_bytes_for(cfg, limits, !f.cudnn_staging, !f.fused_attention)
              : 0;
  const size_t casts = f.cast_operands ? kept + 3 * 2 * largest : 0;
  return flat + act + act / 20 + fused + casts + (size_t(512) << 20);
}

int probe_batch(const BertConfig& cfg, int S, int P, const FootprintOptions& f, double* free_gib, double* need_gib) {
#ifdef LANSBERT_HAVE_CUDA
  size_t free_b = 0, total_b = 0;
  if (!cuda::memory_info(&free_b, &total_b)) return 0;
  *free_gib = gib(double(free_b));
  for (int b : candidate_batches()) {
    const size_t need = bench_bytes_for(cfg, b, S, P, f);
    if (need > free_b) continue;
    if (!cuda::try_allocate(need)) continue;
    *need_gib = gib(double(need));
    return b;
  }
#else
  (void)cfg, (void)S, (void)P, (void)f, (void)free_gib, (void)need_gib;
#endif
  return 0;
}

Status check_batch_fits(const BertConfig& cfg, int B, int S, int P, const FootprintOptions& f, double have,
                        const std::string& where) {
  const double need = double(bench_bytes_for(cfg, B, S, P, f));
  if (have <= 0 || need <= have) return Status::ok();
  int fits = 0;
  for (int b : candidate_batches())
    if (b < B && double(bench_bytes_for(cfg, b, S, P, f)) <= have) {
      fits = b;
      break;
    }
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "bench: --batch %d needs about %.1f GiB (an estimate: weights, gradients, optimizer moments if timed, activations, copies), "
                "more than the %.1f GiB of %s; %s",
                B, gib(need), gib(have), where.c_str(),
                fits > 0 ? ("--batch " + std::to_string(fits) + " fits").c_str()
                         : "not even --batch 1 fits: take a smaller --model or --seq-len");
  return Status::invalid_argument(buf);
}

}  // namespace lansbert::cli
