// The console line and the JSON-lines record of a metrics window.
#include "lansbert/train/metrics.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>

#include "lansbert/core/file_io.h"

namespace lansbert {

void MetricsWindow::add(const ForwardResult& r, const Batch& b) {
  int64_t tokens = 0;
  for (const int32_t m : b.input_mask) tokens += m != 0;
  sums[kLoss] += r.total_loss;
  sums[kMlmLoss] += r.mlm_loss;
  sums[kNspLoss] += r.nsp_loss;
  sums[kMicro] += 1;
  sums[kMlmCorrect] += double(r.mlm_correct);
  sums[kMlmCount] += double(r.mlm_count);
  sums[kNspCorrect] += double(r.nsp_correct);
  sums[kNspCount] += double(r.nsp_count);
  sums[kSequences] += b.batch;
  sums[kTokens] += double(tokens);
  sums[kRows] += b.rows;
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = long(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

namespace {
// The losses and accuracies a training window and a held-out evaluation both report, as
// TensorBoard scalars under `group` ("train", "eval").
TaggedScalars loss_scalars(const std::string& group, double loss, double mlm_loss, double nsp_loss,
                           double mlm_accuracy, double nsp_accuracy) {
  return {{group + "/loss", loss},
          {group + "/mlm_loss", mlm_loss},
          {group + "/nsp_loss", nsp_loss},
          {group + "/mlm_accuracy", mlm_accuracy},
          {group + "/nsp_accuracy", nsp_accuracy}};
}

// " | MFU 43.1%", or nothing where the peak is unknown; tiny values (a stand-in device) keep
// two significant digits rather than printing 0.0%.
std::string mfu_text(double mfu) {
  if (mfu <= 0) return "";
  char buf[48];
  std::snprintf(buf, sizeof buf, mfu >= 1e-3 ? " | MFU %.1f%%" : " | MFU %.2g%%", 100 * mfu);
  return buf;
}

// "B_noise 1234 | " (logging.noise_scale), "B_noise - | " where the window's |G|² estimate was
// not positive, nothing without it.
std::string noise_text(const MetricsRecord& r) {
  if (r.noise_steps == 0) return "";
  if (!std::isfinite(r.noise.scale)) return "B_noise - | ";
  char buf[48];
  std::snprintf(buf, sizeof buf, "B_noise %.4g | ", r.noise.scale);
  return buf;
}

// " (18 rows)" after an evaluation's sequence count when packing put them in fewer rows.
std::string packed_rows(const EvalResult& r) {
  return r.rows != r.sequences ? " (" + std::to_string(r.rows) + " rows)" : "";
}
}  // namespace

TrustRatioSummary summarize_trust_ratios(const std::vector<double>& ratios, const ParamTable& table) {
  std::vector<std::pair<double, size_t>> have;  // (ratio, block), the blocks that have one
  for (size_t b = 0; b < ratios.size() && b < table.size(); ++b)
    if (!std::isnan(ratios[b])) have.emplace_back(ratios[b], b);
  TrustRatioSummary s;
  s.count = have.size();
  if (have.empty()) return s;
  std::sort(have.begin(), have.end());
  s.min = have.front().first;
  s.max = have.back().first;
  s.median = have[(have.size() - 1) / 2].first;
  s.min_tensor = table[have.front().second].name;
  s.max_tensor = table[have.back().second].name;
  return s;
}

namespace {
// {"min", "median", "max", "min_tensor", "max_tensor"} in metrics.jsonl, and the three values
// as TensorBoard scalars `tag`_min, _median, _max.
void add_trust(const char* key, const TrustRatioSummary& t, nlohmann::ordered_json* j, TaggedScalars* scalars) {
  if (t.count == 0) return;
  (*j)[key] = {{"min", t.min}, {"median", t.median}, {"max", t.max},
               {"min_tensor", t.min_tensor}, {"max_tensor", t.max_tensor}};
  const std::string tag = std::string("optimizer/") + key;
  scalars->insert(scalars->end(), {{tag + "_min", t.min}, {tag + "_median", t.median}, {tag + "_max", t.max}});
}
}  // namespace

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

Status check_metrics_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::ok();  // not there yet (an unreadable one: check_can_create's error)
  std::string first;
  for (char c; first.size() < (1u << 20) && f.get(c) && c != '\n';) first += c;
  if (first.empty() && f.eof()) return Status::ok();
  const nlohmann::json j = nlohmann::json::parse(first, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("step")) return Status::ok();
  // A first record a failed write tore (a full disk at the first log): lansbert's own start.
  if (first.rfind("{\"step\":", 0) == 0 || first.rfind("{\"type\":\"eval\"", 0) == 0) return Status::ok();
  return Status::invalid_argument("logging.metrics_file: " + path +
                                  " exists and its first line is not a lansbert metrics record; a run appends only "
                                  "to metrics: name a new file (or the metrics of the run it continues)");
}

Status MetricsLog::write(const MetricsRecord& r) {
  if (console_) {
    std::fprintf(console_,
                 "step %lld/%lld | loss %.4f | mlm_acc %.4f | nsp_acc %.4f | lr %.3e | gnorm %.3f | "
                 "%s%.1f seq/s | %.0f tok/s | %.4f TFLOP/s%s | ETA %s%s\n",
                 (long long)r.step, (long long)r.total_steps, r.loss, r.mlm_accuracy, r.nsp_accuracy,
                 r.lr, r.grad_norm, noise_text(r).c_str(), r.seq_per_s, r.tokens_per_s, r.tflops, mfu_text(r.mfu).c_str(),
                 format_duration(r.eta_s).c_str(),
                 r.eta_step > 0 && r.eta_step < r.total_steps ? (" to step " + std::to_string(r.eta_step)).c_str()
                                                              : "");
    std::fflush(console_);
  }
  nlohmann::ordered_json j = {
      {"step", r.step},           {"total_steps", r.total_steps}, {"loss", r.loss},
      {"mlm_loss", r.mlm_loss},   {"nsp_loss", r.nsp_loss},       {"mlm_accuracy", r.mlm_accuracy},
      {"nsp_accuracy", r.nsp_accuracy}, {"lr", r.lr},             {"grad_norm", r.grad_norm},
      {"loss_scale", r.loss_scale}, {"skipped", r.skipped},       {"seq_per_s", r.seq_per_s},
      {"tokens_per_s", r.tokens_per_s}, {"tflops", r.tflops},     {"elapsed_s", r.elapsed_s},
      {"eta_s", r.eta_s},             {"fill", r.fill},
      {"share", {{"data", r.t_data}, {"compute", r.t_compute}, {"allreduce", r.t_allreduce},
                 {"optimizer", r.t_optimizer}, {"other", r.t_other}}}};
  if (r.mfu > 0) j["mfu"] = r.mfu;
  TaggedScalars scalars = loss_scalars("train", r.loss, r.mlm_loss, r.nsp_loss, r.mlm_accuracy, r.nsp_accuracy);
  if (r.noise_steps > 0) {
    // scale is null where the |G|² estimate is not positive (NaN has no JSON form).
    j["noise"] = {{"scale", std::isfinite(r.noise.scale) ? nlohmann::json(r.noise.scale) : nlohmann::json()},
                  {"grad_sq", r.noise.grad_sq},
                  {"trace", r.noise.trace},
                  {"steps", r.noise_steps}};
    if (std::isfinite(r.noise.scale)) scalars.emplace_back("optimizer/noise_scale", r.noise.scale);
    scalars.emplace_back("optimizer/noise_grad_sq", r.noise.grad_sq);
    scalars.emplace_back("optimizer/noise_trace", r.noise.trace);
  }
  add_trust("trust_ratio", r.trust, &j, &scalars);
  add_trust("trust_ratio_grad", r.trust_grad, &j, &scalars);
  LB_RETURN_IF_ERROR(append(j.dump() + "\n"));
  scalars.insert(scalars.end(), {
      {"train/lr", r.lr},
      {"train/grad_norm", r.grad_norm},
      {"train/loss_scale", r.loss_scale},
      {"train/skipped_steps", double(r.skipped)},
      {"speed/sequences_per_s", r.seq_per_s},
      {"speed/tokens_per_s", r.tokens_per_s},
      {"speed/tflops", r.tflops},
      {"data/fill", r.fill},
      {"time_share/data", r.t_data},
      {"time_share/compute", r.t_compute},
      {"time_share/allreduce", r.t_allreduce},
      {"time_share/optimizer", r.t_optimizer},
      {"time_share/other", r.t_other}});
  if (r.mfu > 0) scalars.emplace_back("speed/mfu", r.mfu);
  return events_.write(r.step, scalars);
}

Status MetricsLog::write_eval(int64_t step, int64_t total_steps, const EvalResult& r, double seconds,
                              const std::vector<std::string>& names, const std::vector<EvalResult>& sets) {
  auto numbers = [](const EvalResult& e) {
    return nlohmann::ordered_json{{"loss", e.mlm_loss + e.nsp_loss}, {"mlm_loss", e.mlm_loss},
                                  {"mlm_accuracy", e.mlm_accuracy},  {"nsp_loss", e.nsp_loss},
                                  {"nsp_accuracy", e.nsp_accuracy},  {"sequences", e.sequences},
                                  {"rows", e.rows}};
  };
  auto console_line = [&](const std::string& head, const EvalResult& e, const std::string& tail) {
    std::fprintf(console_,
                 "%s | loss %.4f | mlm_loss %.4f | mlm_acc %.4f | nsp_loss %.4f | nsp_acc %.4f | %lld sequences%s%s\n",
                 head.c_str(), e.mlm_loss + e.nsp_loss, e.mlm_loss, e.mlm_accuracy, e.nsp_loss, e.nsp_accuracy,
                 (long long)e.sequences, packed_rows(e).c_str(), tail.c_str());
  };
  if (console_) {
    char time[32];
    std::snprintf(time, sizeof time, " in %.1fs", seconds);
    console_line("eval after step " + std::to_string(step) + "/" + std::to_string(total_steps), r,
                 sets.empty() ? time : std::string(time) + ", " + std::to_string(sets.size()) + " sets:");
    // Each named set under the line of their sums, its name where the step was.
    size_t width = 0;
    for (const std::string& n : names) width = std::max(width, n.size());
    for (size_t i = 0; i < sets.size(); ++i)
      console_line("  " + names[i] + std::string(width - names[i].size(), ' '), sets[i], "");
    std::fflush(console_);
  }
  nlohmann::ordered_json j = {{"type", "eval"}, {"step", step}, {"total_steps", total_steps}};
  j.update(numbers(r));
  j["seconds"] = seconds;
  TaggedScalars scalars =
      loss_scalars("eval", r.mlm_loss + r.nsp_loss, r.mlm_loss, r.nsp_loss, r.mlm_accuracy, r.nsp_accuracy);
  if (!sets.empty()) {
    nlohmann::ordered_json named = nlohmann::ordered_json::object();
    for (size_t i = 0; i < sets.size(); ++i) {
      const EvalResult& e = sets[i];
      named[names[i]] = numbers(e);
      const TaggedScalars more = loss_scalars("eval/" + names[i], e.mlm_loss + e.nsp_loss, e.mlm_loss, e.nsp_loss,
                                              e.mlm_accuracy, e.nsp_accuracy);
      scalars.insert(scalars.end(), more.begin(), more.end());
    }
    j["sets"] = std::move(named);
  }
  LB_RETURN_IF_ERROR(append(j.dump() + "\n"));
  return events_.write(step, scalars);
}

Status MetricsLog::append(const std::string& line) {
  if (path_.empty()) return Status::ok();
  if (!file_) {
    LB_RETURN_IF_ERROR(create_parent_directories(path_, "logging.metrics_file"));
    file_ = std::fopen(path_.c_str(), "a+");
    if (!file_) return Status::io_error(path_ + ": cannot open the metrics file for appending");
    // A run that died mid-line (its disk full) left a torn record: this run's first starts
    // on a line of its own, so only the torn one is lost to a reader.
    if (std::fseek(file_, -1, SEEK_END) == 0) {
      const int last = std::fgetc(file_);
      std::fseek(file_, 0, SEEK_END);  // a stream turns from reading to writing at a seek
      if (last != '\n' && std::fputc('\n', file_) == EOF)
        return Status::io_error(path_ + ": write failed: " + std::strerror(errno));
    }
  }
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    return Status::io_error(path_ + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

}  // namespace lansbert
