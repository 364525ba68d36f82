// TrainConfig: everything one pretraining phase needs, as plain typed fields, and the plan
// derived from it (accumulation, tokens, memory). The YAML loader (lansbert/config) fills it
// and maps each key path to its line; this layer knows no YAML. validate() checks the
// values that must hold together and names the key path of the first that does not, so the
// loader can add the file and line. The resolved config is also stored, as JSON, in every
// checkpoint (config_to_json) so that a resumed run can check it continues the same phase.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lansbert/backend/attention.h"
#include "lansbert/backend/ops.h"
#include "lansbert/core/status.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/optim/updater.h"

namespace lansbert {

struct ModelSection {
  std::string preset = "bert-base";
  // Explicit sizes override the preset.
  std::optional<int> vocab_size, hidden, layers, heads, intermediate, max_positions;
  std::optional<float> hidden_dropout, attention_dropout, init_std;
  std::optional<kern::GeluForm> hidden_act;  // gelu (the preset's) | gelu_tanh
};

struct DataSection {
  std::vector<std::string> train;     // shard globs
  std::vector<std::string> eval;      // held-out globs (lansbert eval default)
  // Empty: one shuffled order of all of data.train's samples per epoch. Else one weight per
  // data.train entry, each entry a source: every position of the run draws from a source
  // in these proportions, repeating a source's samples as often as its weight asks
  // (docs/data-format.md "Blending").
  std::vector<double> weights;
  std::string format = "auto";        // auto | lbs | hdf5 (hdf5: NVIDIA's "training" rule)
  int seq_len = 128;                  // must match the shards
  int max_pred = 20;                  // must match the shards
  std::string masking = "auto";       // auto | static | dynamic: what the shards must hold
  bool whole_word = false;            // true: mask whole words (dynamic shards; static ones must
                                      // be prepped so); false: as the shards say. Needs vocab.
  std::string vocab;                  // vocab.txt: whole-word masking and export
  // Pack each micro-batch's sequences into fewer rows (data/packing.h): the same data, masked
  // slots and losses, computed on less padding. Without dropout the same results to rounding;
  // with it the masks fall elsewhere. A run may resume with the other setting.
  bool packing = false;
};

struct BatchSection {
  int64_t global_batch = 256;  // sequences per update over all ranks
  int micro_batch = 32;        // sequences per forward/backward on one rank
  // What the backward recomputes instead of the forward keeping it (ModelLimits::recompute,
  // model/bert_model.h): none, attention (the probabilities: ~2.5% more FLOPs for bert-large at 512,
  // none for layers that run the fused attention, which keep their statistics) or
  // layers (all activations but the layers' outputs: about a third more encoder compute), so
  // that a larger micro_batch fits. Changes no result: a run may resume with another setting.
  Recompute recompute = Recompute::kNone;
};

struct PrecisionSection {
  std::string dtype = "fp32";       // fp32 | bf16 | fp16: GEMM operands (CPU: emulated)
  std::string loss_scale = "auto";  // auto (dynamic for fp16, none otherwise) | none | static | dynamic
  bool tf32 = false;                // backend: cuda: fp32 GEMMs in TF32 on tensor cores
  // native | cudnn | auto | flash (backend/attention.h): cudnn/auto run cuDNN's fused
  // attention (bf16 inside, attention dropout through lansbert's own keep mask) where it
  // applies; flash is lansbert's own, on both backends. Here, not under model:, because like
  // tf32 it picks an implementation and its numerics, not the model (resume compares model:).
  std::string attention = "native";
  // kernel | cublas (backend: cuda, dtype bf16/fp16): who rounds the fp32 activations and
  // weights to 16 bits for a GEMM. kernel: lansbert's cast kernels (the shared half.h bodies,
  // bit-identical to the CPU emulation) write a 16-bit copy, then cuBLAS multiplies 16-bit
  // operands. cublas: the fp32 operands go to cuBLAS with compute type 32F_FAST_16BF/16F and
  // it converts them inside the GEMM (no extra pass over memory; cuBLAS may use bf16/fp16 or
  // TF32 and rounds as it likes).
  std::string gemm_cast = "kernel";
  // fp32 | 16bit (dtype bf16/fp16, gemm_cast kernel): where the FFN's [N, I] pre-activation is
  // stored, and at what rounding its gradient is used (ModelLimits::half_activations). 16bit stores it
  // in the GEMMs' format, as Megatron-LM and NVIDIA's BERT store activations: 10 bytes of
  // memory traffic fewer per element a step, 2 bytes less arena per element.
  std::string activations = "fp32";
  LossScalerConfig scaler;          // scale settings (mode set by resolve)
};

struct CheckpointSection {
  std::string dir = "checkpoints";
  int64_t every_steps = 1000;   // 0: only at the end and on a signal
  double every_minutes = 0;     // 0: off
  int keep_last = 3;            // older step-* directories are removed after a save
  // Rank 0 writes each replicated checkpoint but the last on a thread while training goes on
  // (background_checkpoint.h); the ranks wait only for a copy of the weights and moments.
  bool async = false;
};

struct LoggingSection {
  int64_t every_steps = 10;
  std::string metrics_file;  // default <checkpoint.dir>/metrics.jsonl; "-" for none
  // TensorBoard event files of the same records: "" or "-" for none (the default), "auto" for
  // <checkpoint.dir>/tensorboard (so that a run given another checkpoint.dir keeps its curves
  // apart), else the folder.
  std::string tensorboard_dir;
  // Estimate the gradient noise scale (optim/noise_scale.h) at each window from the first
  // micro-batch of every update and the whole update, averaged over recent updates: one more
  // pass over the gradients per update. Needs an accumulation of 2 or more micro-batches.
  bool noise_scale = false;
  // The horizon of its moving averages, in updates (1: each estimate from its last update alone).
  int64_t noise_scale_updates = 100;
};

// Held-out evaluation during training, on data.eval (statically masked shards with the
// training seq_len and max_pred): MLM/NSP loss and accuracy, reduced over ranks, logged on
// the console and as {"type": "eval", ...} lines in the metrics file.
struct EvaluationSection {
  int64_t every_steps = 0;     // 0: only at the end of the run (when data.eval is given)
  int64_t max_sequences = -1;  // the first N samples of data.eval (of each set, with names); -1: all
  // Empty: data.eval is one held-out set. Else one name per data.eval entry: each entry is a
  // set of its own (a domain of a blend, say), evaluated on its first max_sequences samples and
  // reported under its name (eval/<name>/loss), beside the sums over all of them.
  std::vector<std::string> names;
};

// Data-parallel training under mpirun/srun (one rank: every key is accepted and has no effect).
struct DistributedSection {
  double bucket_mb = 25;                // gradient all-reduce bucket size (MiB), started from backward
  std::string reduction_order = "fast"; // fast: the library's algorithm | fixed: rank order (reproducible)
  bool shard_optimizer = false;         // ZeRO-1: each rank holds and updates 1/world of m and v
  // Start each bucket's reduction from the backward pass (true) or reduce after it (false:
  // the same bytes with nothing hidden, and when sharded the reduce-scatter instead of the
  // reductions to owners; for measuring the overlap, and for debugging)
  bool overlap_reduction = true;
  // The dtype gradients are reduced in: fp32 | bf16 | fp16 (half the bytes; kernels/grad_wire.h)
  std::string grad_reduce_dtype = "fp32";
};

struct TrainConfig {
  std::string source;  // the file it came from (messages)
  ModelSection model;
  DataSection data;
  BatchSection batch;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  PrecisionSection precision;
  CheckpointSection checkpoint;
  LoggingSection logging;
  EvaluationSection evaluation;
  DistributedSection distributed;
  PhaseStart phase_start = PhaseStart::kKeepMoments;
  uint64_t seed = 12345;
  std::string backend = "cpu";  // cpu | cuda

  // The model sizes: the preset with the explicit fields applied.
  Status resolve_model(BertConfig* out) const;
  // Checks every cross-field rule for a run on `world` ranks. On error *key is the key path
  // at fault (e.g. "batch.global_batch") and the message says what was expected.
  Status validate(int world, std::string* key) const;
  // The optimizer, schedule and loss-scaler settings. REQUIRES: validate() ok.
  UpdaterConfig updater_config() const;
  // The backend's GEMM mode from precision.dtype and precision.tf32.
  GemmMath gemm_math() const;
  // What the model's activation arena is laid out for: batch.micro_batch sequences of
  // data.seq_len with data.max_pred masked slots, recomputed or not (batch.recompute).
  // With precision.attention flash, or on a device with cudnn|auto, the layers keep the fused
  // attention's statistics (ModelLimits::attention_stats); precision.activations 16bit
  // gives the FFN its 16-bit pre-activation buffers (ModelLimits::half_activations).
  ModelLimits model_limits() const {
    return {batch.micro_batch, data.seq_len, data.max_pred, batch.recompute,
            backend_attention_mode() != AttentionMode::kNative, precision.activations == "16bit"};
  }
  // The metrics file this run appends to ("" for none).
  std::string metrics_path() const;
  // logging.tensorboard_dir resolved: "" for none.
  std::string tensorboard_path() const;
  // precision.attention parsed. REQUIRES: validate() ok.
  AttentionMode attention_mode() const;
  // The attention mode the configured backend runs: attention_mode() on CUDA; on the CPU flash,
  // or the hand-written attention (cuDNN's never applies there, so `auto` is the hand-written
  // one; `cudnn` is refused by validate()).
  AttentionMode backend_attention_mode() const {
    const AttentionMode a = attention_mode();
    if (backend != "cpu") return a;
    return a == AttentionMode::kFlash ? AttentionMode::kFlash : AttentionMode::kNative;
  }
  // precision.gemm_cast == "cublas". REQUIRES: validate() ok.
  bool cast_in_gemm() const { return precision.gemm_cast == "cublas"; }
  // 16-bit GEMMs whose operands lansbert's kernels convert (not cuBLAS): the kept 16-bit
  // copies, the optimizer's weight copy and the smaller arena apply. REQUIRES: validate() ok.
  bool converts_gemm_operands() const { return is_half_gemm(gemm_math()) && !cast_in_gemm(); }
};

// What a validated config implies for a run on `world` ranks.
struct TrainPlan {
  int world = 1;
  int accumulation = 1;        // micro-batches per rank per update
  int64_t steps = 0;           // updates in this phase
  int64_t sequences = 0;       // steps * global_batch
  int64_t tokens = 0;          // sequences * seq_len (padding included)
  size_t parameters = 0;       // parameter count
  size_t flat_bytes = 0;       // params, grads, m, v (fp32; m, v per rank when sharded)
  size_t half_bytes = 0;       // 16-bit buffers: the weight copy, the gradient wire, kept activations,
                               // the fused attention's dropout mask
  size_t reduce_bytes = 0;     // gradient bytes each update reduces (0 on one rank)
  size_t activation_bytes = 0; // the model's arena for one micro-batch
  uint64_t checkpoint_bytes = 0;  // about one checkpoint on disk (checkpoint_bytes_estimate)
  double flops_per_sequence = 0;
  // What a rank holds: flat buffers, 16-bit copies and activations (--dry-run's "memory per
  // rank"; a lower bound: cuBLAS and cast workspaces come on top).
  size_t bytes_per_rank() const { return flat_bytes + half_bytes + activation_bytes; }
};
// REQUIRES: config.validate(world) ok. Builds the model's table (no allocation of buffers)
// and asks the activation size of a micro-batch from the model's own sizing.
Status make_plan(const TrainConfig& config, int world, TrainPlan* plan);
// Refuses a run whose plan (flat buffers, 16-bit copies, activations: what --dry-run prints,
// a lower bound of what it allocates) times `ranks` sharing the memory exceeds `have` bytes
// of `where` ("this host's memory", "device 0"), naming the parts and the keys that shrink
// them. invalid_argument: a config that cannot run here.
Status check_plan_fits(const TrainConfig& config, const TrainPlan& plan, double have, int ranks,
                       const std::string& where);

// Training FLOPs of one sequence (forward + backward = 3x forward); docs/training.md:
//   6 * S * L * (4H^2 + 2HI)      encoder matmuls (QKV, output, FFN), 2 FLOPs per MAC
// + 12 * L * S^2 * H              attention scores and context (QK^T, PV), fwd + bwd
// + 6 * P * (H^2 + V*H)           MLM transform and decoder on the P masked slots only
// + 6 * (H^2 + 2H)                pooler and NSP head on [CLS]
double training_flops_per_sequence(const BertConfig& c, int seq_len, int max_pred);

// The resolved config as a JSON object (stable key order): written into each checkpoint, whose
// sections a resume compares with the run's; parse_train_config (config/config_loader.h) reads
// it back.
std::string config_to_json(const TrainConfig& c, int indent = -1);

}  // namespace lansbert
