// BertModel<T>: BERT for pretraining (embeddings, post-LN encoder layers, pooler, MLM head
// with the decoder tied to the word embeddings, NSP head) written as explicit forward and
// backward passes over an Ops<T> backend. Parameters and gradients are two flat buffers laid
// out by the parameter table; activations live in one arena sized for the largest
// micro-batch at construction, so a step allocates nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "lansbert/backend/ops.h"
#include "lansbert/core/address_range.h"
#include "lansbert/core/buffer.h"
#include "lansbert/core/status.h"
#include "lansbert/model/batch.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/model/param_table.h"

namespace lansbert {

template <typename T>
struct BertState;  // activations and parameter locations (src/model/bert_model_impl.h)

struct StepContext {
  bool train = true;   // dropout on
  uint64_t seed = 0;   // the run's dropout seed
  uint32_t step = 0;   // micro-step counter: dropout masks differ per micro-step
};

struct ForwardResult {
  double mlm_loss = 0;   // mean over the batch's masked positions
  double nsp_loss = 0;   // mean over sequences
  double total_loss = 0; // mlm_loss + nsp_loss, as Hugging Face BertForPreTraining
  int64_t mlm_count = 0, mlm_correct = 0;
  int64_t nsp_count = 0, nsp_correct = 0;
  double mlm_accuracy() const { return mlm_count ? double(mlm_correct) / mlm_count : 0.0; }
  double nsp_accuracy() const { return nsp_count ? double(nsp_correct) / nsp_count : 0.0; }
};

// Activation recomputation (batch.recompute): what the forward does not keep for the
// backward, which computes it again, with the same dropout keys, just before the layer's
// backward (the last layer's activations are still there and are not recomputed). The same
// loss and gradient bits either way; per layer the arena holds about N(8H + 2I) + 2 B A S^2
// floats without recomputation (N(4H + I) + B A S^2 with 16-bit GEMMs and cast reuse:
// OutputStorage).
enum class Recompute {
  kNone,
  // The attention core (scores, softmax, dropout, P V) of all but the last layer: the layers
  // share one pair of B A S^2 probability buffers. Costs the attention core's forward again
  // (4 S^2 H FLOPs a sequence and layer: S / 6H of the dense layers' forward FLOPs, ~2.5%
  // of a bert-large step at 512 tokens).
  kAttention,
  // Whole layers: the layers share one set of activation buffers and keep only their outputs
  // (N x H each). Costs one more forward of all layers but the last (about a third more
  // encoder FLOPs).
  kLayers,
};
const char* recompute_name(Recompute r);                      // "none", "attention", "layers"
Status parse_recompute(const std::string& s, Recompute* out);  // names batch.recompute in errors

// The largest micro-batch the activation arena is laid out for, and how it is laid out.
struct ModelLimits {
  int max_batch = 8;   // B
  int max_seq = 128;   // S
  int max_pred = 20;   // P
  Recompute recompute = Recompute::kNone;
  // The ops may run a fused attention that saves only softmax statistics (attention_forward
  // returning kFused: the CUDA backend's cuDNN path). With Recompute::kAttention each layer
  // then also gets a B A S buffer for them (AttentionForward::stats), so a layer whose forward
  // ran fused keeps all its backward needs and is not recomputed; only layers that ran the
  // hand-written attention are. No effect with the other Recompute modes.
  bool attention_stats = false;
  // The FFN's pre-activation stored only in the GEMMs' 16-bit format, and its gradient d(act)
  // used at that rounding; where the attention can (Ops::attention_keeps_input_gradients: the
  // flash attention) d(q, k, v) too (`precision.activations: 16bit`; Ops::half_activations,
  // which the ops must have). Each layer then holds the pre-activation in 2 bytes an element
  // instead of 4 (the GEMM's fp32 scratch, where a backend needs one, is the backward's d(act)
  // buffer, free in a forward), and a step moves 10 bytes fewer per element of it.
  bool half_activations = false;
};

// What the ops a model runs on do with the outputs that only GEMMs read, which decides which
// activations the arena gives memory (activation_bytes_for). Where kept_outputs_unwritten,
// such an output is written only as its 16-bit copy and its fp32 span is a key (taken from
// reserved address space, Arena::take_key): the GELU output with 16-bit activations, and q/k/v
// and ctx where attention_reads_only_gemm_operands (4 x N x H + N x I floats a layer fewer).
struct OutputStorage {
  bool kept_outputs_unwritten = false;             // Ops::kept_outputs_unwritten()
  bool attention_reads_only_gemm_operands = true;  // Ops::attention_reads_only_gemm_operands()
  // Ops::attention_runs_flash(head_dim): every layer's attention saves only its flash
  // statistics, so the arena holds a [B, A, S] statistics buffer per layer and [B, A, S] of
  // backward scratch instead of the [B, A, S, S] probability slots (one or two per layer, or
  // one shared when recomputing) and the two [B, A, S, S] backward buffers. With the flash
  // attention no batch.recompute mode is needed to save that memory.
  bool attention_statistics_only = false;

  template <typename T>
  static OutputStorage of(const Ops<T>& ops, const BertConfig& config) {
    return {ops.kept_outputs_unwritten(), ops.attention_reads_only_gemm_operands(),
            ops.attention_runs_flash(config.head_dim())};
  }
  // For plans made before any ops exist: the ops' answers for 16-bit GEMMs whose casts are
  // kept (kept_outputs_unwritten) and the attention the backend runs (the hand-written attention
  // reads q/k/v and ctx only through GEMMs, the flash one through their copies where they are
  // kept, cuDNN's in fp32; CudaOps and CpuOps answer alike). flash_runs: the backend's
  // attention_runs_flash (flash_attention_planned).
  static OutputStorage for_plan(bool kept_outputs_unwritten, AttentionMode attention, bool flash_runs) {
    const bool gemm_only = attention == AttentionMode::kNative ||
                           (attention == AttentionMode::kFlash && kept_outputs_unwritten);
    return {kept_outputs_unwritten, gemm_only, attention == AttentionMode::kFlash && flash_runs};
  }
};

template <typename T>
class BertModel {
 public:
  BertModel(const BertConfig& config, Ops<T>& ops, ModelLimits limits);
  ~BertModel();
  BertModel(const BertModel&) = delete;
  BertModel& operator=(const BertModel&) = delete;

  const BertConfig& config() const { return config_; }
  const ParamTable& table() const { return table_; }
  const ModelLimits& limits() const { return limits_; }
  Ops<T>& ops() { return ops_; }
  // Flat buffers on the backend's device, table_.total_elements() long.
  T* params() { return params_.data(); }
  T* grads() { return grads_.data(); }
  const T* params() const { return params_.data(); }
  const T* grads() const { return grads_.data(); }
  T* param(const ParamEntry& e) { return params_.data() + e.offset; }
  T* grad(const ParamEntry& e) { return grads_.data() + e.offset; }
  size_t activation_bytes() const { return arena_bytes_; }
  // The arena a model of `config` would need for `limits`, without allocating anything
  // (plans and memory estimates for models too big to build here), on ops that store outputs
  // as `storage` says (16-bit GEMMs with cast reuse need less).
  static size_t activation_bytes_for(const BertConfig& config, ModelLimits limits, OutputStorage storage = {});
  // The 16-bit copies of kept activations and gradients (Ops::keep_gemm_operand, the *_kept
  // ops) where the backend converts GEMM operands and reuses them, in bytes. A backend keeps
  // a copy's memory with its address after the span is dropped (KeptOperands), so this is
  // the sum over every address ever kept in a step: per layer its input, ctx and h1 (N x H
  // each), the GELU output (N x I) and, where the hand-written attention keeps its operands
  // (attention_keeps_operands), q/k/v (N x 3H) and the probabilities (B x A x S^2); with
  // Recompute::kLayers one layer's set and each layer's input, with kAttention one layer's
  // probabilities; the backward's output gradients
  // (N x (6H + I), d(scores), the heads'). For plans: the weights' copy and the GEMMs'
  // operand workspaces are counted apart. attention_keeps_probabilities false: the flash
  // attention, which takes q/k/v as kept copies but has no probabilities.
  static size_t kept_copy_bytes_for(const BertConfig& config, ModelLimits limits,
                                    bool attention_keeps_operands = true, bool attention_keeps_probabilities = true);

  // BERT's initialisation: normal(0, init_std) weights and embeddings (the [PAD] row of the
  // word embeddings zero, as Hugging Face does), zero biases, LayerNorm gamma 1 and beta 0.
  // Drawn with Philox keyed by (seed, tensor index): the same on every device.
  void init_params(uint64_t seed);
  void zero_grads();

  // The 16-bit weight copy for 16-bit GEMMs (GemmMath kBf16/kFp16), which the optimizer keeps
  // current in its update pass (FlatBuffers::half_params), so that a forward reads it instead
  // of casting the weights every micro-step. enable_weight_copy allocates it (zeros, on the
  // backend's device); set_weight_copy_current(true) says it now holds
  // kern::float_to_half(params()) (after an update that wrote it), false that params()
  // changed without it. While it is not current (at first, after init_params), a forward
  // casts the weights as before. Not for sharded updates, which write their slice only.
  void enable_weight_copy(kern::HalfFormat format);
  uint16_t* weight_copy() { return weight_copy_.data(); }  // null unless enabled
  kern::HalfFormat weight_copy_format() const { return weight_copy_format_; }
  void set_weight_copy_current(bool current) { weight_copy_current_ = current && weight_copy_.data(); }

  // Runs the forward pass and keeps what backward needs. REQUIRES: batch within limits,
  // ids < vocab, positions < seq_len.
  ForwardResult forward(const Batch& batch, const StepContext& ctx);
  // Called during backward when the gradients of table entries [first, end) are final for
  // this micro-step: after the heads (pooler and cls.*), after each encoder layer from the
  // last to the first, and after the embeddings. The data-parallel layer starts reducing a
  // bucket from here while the rest of backward runs.
  using GradReadyFn = std::function<void(size_t first_entry, size_t end_entry)>;

  // Adds d(loss_weight * total_loss)/d(params) of the last forward to grads().
  void backward(T loss_weight, const GradReadyFn& on_ready = nullptr);

 private:
  BertConfig config_;
  ParamTable table_;
  Ops<T>& ops_;
  ModelLimits limits_;
  Buffer<T> params_, grads_;
  Buffer<uint16_t> weight_copy_;
  kern::HalfFormat weight_copy_format_ = kern::HalfFormat::kBf16;
  bool weight_copy_current_ = false;
  Buffer<char> arena_buffer_;
  size_t arena_bytes_ = 0;
  AddressRange arena_keys_;  // the addresses of outputs held only as 16-bit copies
  std::unique_ptr<BertState<T>> state_;

  // After layer l's forward (not the last layer's), with recomputation: drops the kept
  // GEMM-operand copies of what the backward recomputes (the next layer overwrites it): the
  // probabilities (kAttention), or all of the layer's activations and its input x (kLayers).
  void release_layer(int l, const T* x);
  // Before layer l's backward (not the last layer's), with recomputation: computes again what
  // release_layer let go, from the kept q/k/v (kAttention) or from the layer's input x.
  void recompute_layer(int l, const T* x);
};

}  // namespace lansbert
