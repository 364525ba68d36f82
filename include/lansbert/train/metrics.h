// Metrics of the training loop: per-window sums that are all-reduced over ranks, and the
// rank-0 output: one console line per window, one JSON object per line in the metrics file
// (appended, so a resumed run continues the same file) and, with logging.tensorboard_dir, the
// same values as TensorBoard scalars (tensorboard_events.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/optim/noise_scale.h"
#include "lansbert/train/evaluate.h"
#include "lansbert/train/tensorboard_events.h"

namespace lansbert {

// Sums over the micro-batches of a window, all-reduced (summed) over ranks before use. With
// logging.noise_scale, kNoiseSteps counts the rank's measured updates of the window, and at
// logging time each rank puts in its moving sums (over about logging.noise_scale_updates
// updates) of its first micro-batch's |G_b|² (kNoiseSmall), of the update's |G_B|² (kNoiseBig,
// the same on every rank) and of their weights (kNoiseWeight): over the ranks' sums,
// kNoiseSmall / kNoiseWeight is |G_b|² averaged over ranks and recent updates.
struct MetricsWindow {
  enum : int { kLoss, kMlmLoss, kNspLoss, kMicro, kMlmCorrect, kMlmCount, kNspCorrect, kNspCount,
               kSequences, kTokens, kRows, kNoiseSmall, kNoiseBig, kNoiseWeight, kNoiseSteps, kCount };
  double sums[kCount] = {};
  // One micro-batch: its forward pass's losses, its sequences, the tokens they hold (input_mask's
  // nonzeros; the rest of the rows' positions are padding) and the rows the model computed on
  // (fewer than the sequences when packed).
  void add(const ForwardResult& r, const Batch& b);
  void all_reduce(Communicator& comm) { comm.all_reduce(sums, kCount, ReduceOp::kSum); }
  double mean_loss() const { return sums[kMicro] ? sums[kLoss] / sums[kMicro] : 0; }
  double mlm_accuracy() const { return sums[kMlmCount] ? sums[kMlmCorrect] / sums[kMlmCount] : 0; }
  double nsp_accuracy() const { return sums[kNspCount] ? sums[kNspCorrect] / sums[kNspCount] : 0; }
};

// The trust ratios of one update (UpdateStats::trust_ratio) over the blocks that have one:
// their count, min, median (the lower middle of an even count), max, and the tensors of the
// min and the max (the first block of a tied minimum, the last of a tied maximum). count 0
// (AdamW, no update applied): nothing is logged.
struct TrustRatioSummary {
  size_t count = 0;
  double min = 0, median = 0, max = 0;
  std::string min_tensor, max_tensor;
};
TrustRatioSummary summarize_trust_ratios(const std::vector<double>& ratios, const ParamTable& table);

// One logged line's values.
struct MetricsRecord {
  int64_t step = 0, total_steps = 0;
  double loss = 0, mlm_loss = 0, nsp_loss = 0, mlm_accuracy = 0, nsp_accuracy = 0;
  double lr = 0, grad_norm = 0, loss_scale = 1;
  int64_t skipped = 0;
  // tokens_per_s counts sequence positions, padding included (what the model computes on);
  // fill is the share of them that hold tokens.
  double seq_per_s = 0, tokens_per_s = 0, tflops = 0, eta_s = 0, elapsed_s = 0, fill = 0;
  // The step eta_s counts to: total_steps, or --stop-at-step's (the console line names it then).
  int64_t eta_step = 0;
  // tflops over all ranks' dense peak for the GEMM precision (train/device_peaks.h); 0 where
  // the peak is unknown (the CPU, a device not in the table): then neither printed nor written.
  double mfu = 0;
  // Shares of the window's wall time.
  double t_data = 0, t_compute = 0, t_allreduce = 0, t_optimizer = 0, t_other = 0;
  // logging.noise_scale: the estimate (optim/noise_scale.h) from the moving averages as of this
  // window, which measured noise_steps updates (0: none measured, nothing logged).
  int64_t noise_steps = 0;
  NoiseScaleEstimate noise;
  // The trust ratios of the window's last applied update (LANS: `trust_grad` is its gradient
  // direction's); count 0 when the loss scaler skipped every step of the window.
  TrustRatioSummary trust, trust_grad;
};

// A run appends to logging.metrics_file, which a resumed run shares with the run it continues:
// an existing file must already hold metrics records (its first line a JSON object with a
// "step"), so that a path named by mistake (a shard, a config) is refused at start-up instead
// of written into. An empty or missing file is fine. invalid_argument naming the key and path.
Status check_metrics_file(const std::string& path);

class MetricsLog {
 public:
  // path "" writes no file, tensorboard_dir "" no event file. Opening happens on the first
  // write, so a run that fails before its first step creates nothing. first_step: the first
  // step this run logs (the resumed step + 1).
  MetricsLog(FILE* console, std::string path, std::string tensorboard_dir = "", int64_t first_step = 1)
      : console_(console), path_(std::move(path)), events_(std::move(tensorboard_dir), first_step) {}
  ~MetricsLog();
  Status write(const MetricsRecord& r);
  // A held-out evaluation after `step`: a console line and {"type": "eval", ...}. With named
  // sets (evaluation.names; `sets` in the same order, `r` their sums) a console line each too,
  // the line's "sets": {name: {...}} and the TensorBoard tags eval/<name>/loss and the like.
  Status write_eval(int64_t step, int64_t total_steps, const EvalResult& r, double seconds,
                    const std::vector<std::string>& names = {}, const std::vector<EvalResult>& sets = {});

 private:
  Status append(const std::string& line);

  FILE* console_;
  std::string path_;
  FILE* file_ = nullptr;
  EventFile events_;
};

// "1h02m" / "3m05s" / "12s".
std::string format_duration(double seconds);

}  // namespace lansbert
