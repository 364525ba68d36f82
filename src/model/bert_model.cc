// BertModel: construction (parameter table, flat buffers, arena layout), initialisation,
// and the forward/backward orchestration over the parts in encoder_layer.cc,
// embeddings.cc and pretraining_heads.cc.
#include "lansbert/model/bert_model.h"

#include <cmath>
#include <initializer_list>
#include <string>

#include "bert_model_impl.h"
#include "lansbert/core/check.h"

namespace lansbert {

namespace {
const ParamEntry* entry(const ParamTable& t, const std::string& name) {
  const ParamEntry* e = t.find(name);
  LB_CHECK_MSG(e != nullptr, "parameter table has no " + name);
  return e;
}
LinearParams linear(const ParamTable& t, const std::string& prefix) {
  return {entry(t, prefix + ".weight"), entry(t, prefix + ".bias")};
}
// The query entries of `self` ("...attention.self."), after checking that the key's and the
// value's follow them without gaps: the encoder layer treats the three as one linear layer.
LinearParams packed_qkv(const ParamTable& t, const std::string& self, int hidden) {
  const LinearParams q = linear(t, self + "query"), k = linear(t, self + "key"), v = linear(t, self + "value");
  const size_t H = size_t(hidden);
  LB_CHECK_MSG(k.w->offset == q.w->offset + H * H && v.w->offset == k.w->offset + H * H &&
                   k.b->offset == q.b->offset + H && v.b->offset == k.b->offset + H,
               "parameter table: " + self + "{query,key,value} are not packed");
  return q;
}
}  // namespace

template <typename T>
void BertState<T>::layout(Arena& a, const ModelLimits& lim, OutputStorage storage) {
  const BertConfig& c = *config;
  const size_t B = lim.max_batch, S = lim.max_seq, N = B * S, Pt = B * lim.max_pred;
  const size_t H = c.hidden, I = c.intermediate, V = c.vocab_size;
  const size_t BASS = B * c.heads * S * S;
  ids = a.take<int32_t>(N);
  seg = a.take<int32_t>(N);
  mask = a.take<int32_t>(N);
  pos_ids = a.take<int32_t>(N);
  cls_index = a.take<int32_t>(B);
  mlm_index = a.take<int32_t>(Pt);
  mlm_labels = a.take<int32_t>(Pt);
  nsp_labels = a.take<int32_t>(B);
  key_lengths = a.take<int32_t>(B);
  emb_sum = a.take<T>(N * H);
  emb_mean = a.take<T>(N);
  emb_rstd = a.take<T>(N);
  emb_out = a.take<T>(N * H);
  layers.resize(c.layers);
  const bool attn_dropout = c.attention_dropout > 0;
  const bool kept_outputs_unwritten = storage.kept_outputs_unwritten;
  // Outputs written only as their 16-bit copies get addresses to key them, no memory.
  auto take_output = [&](bool copy_only, size_t n) { return copy_only ? a.take_key<T>(n) : a.take<T>(n); };
  const bool attention_copy_only = kept_outputs_unwritten && storage.attention_reads_only_gemm_operands;
  residual_copy_only = lim.half_activations && kept_outputs_unwritten && lim.recompute != Recompute::kLayers;
  // A layer's attention probabilities (only the flash statistics where the attention saves
  // nothing else), and everything else of it but its output h2 (which the next layer reads as
  // its input).
  const bool stats_only = storage.attention_statistics_only;
  const size_t BAS = B * c.heads * S;
  auto take_probs = [&](LayerActs<T>& l) {
    if (stats_only) {
      l.probs = l.probs_drop = nullptr;
      l.stats = a.take<T>(BAS);
      return;
    }
    l.probs = a.take<T>(BASS);
    l.probs_drop = !attn_dropout ? nullptr : kept_outputs_unwritten ? l.probs : a.take<T>(BASS);
  };
  auto take_rest = [&](LayerActs<T>& l) {
    l.qkv = take_output(attention_copy_only, 3 * N * H);
    l.q = l.qkv;
    l.k = l.qkv + H;
    l.v = l.qkv + 2 * H;
    l.ctx = take_output(attention_copy_only, N * H);
    l.res1 = take_output(residual_copy_only, N * H);
    l.mean1 = a.take<T>(N);
    l.rstd1 = a.take<T>(N);
    l.h1 = take_output(residual_copy_only, N * H);
    if (lim.half_activations) {
      l.ffn_pre = nullptr;
      l.ffn_pre16 = a.take<uint16_t>(N * I);
      l.ffn_act = take_output(kept_outputs_unwritten, N * I);
    } else {
      l.ffn_pre = a.take<T>(N * I);
      l.ffn_act = kept_outputs_unwritten ? l.ffn_pre : a.take<T>(N * I);
    }
    l.res2 = take_output(residual_copy_only, N * H);
    l.mean2 = a.take<T>(N);
    l.rstd2 = a.take<T>(N);
  };
  // Recomputing whole layers, every layer's scratch is the same memory; recomputing the
  // attention, the probabilities are (ModelLimits::recompute).
  // Recomputing the attention of layers that save only statistics recomputes nothing: they
  // are laid out as without recomputation.
  LayerActs<T> shared;
  const bool share_probs = lim.recompute == Recompute::kLayers || (lim.recompute == Recompute::kAttention && !stats_only);
  if (share_probs) take_probs(shared);
  if (lim.recompute == Recompute::kLayers) take_rest(shared);
  for (LayerActs<T>& l : layers) {
    if (lim.recompute == Recompute::kLayers) {
      l = shared;
    } else {
      if (share_probs) {
        l.probs = shared.probs;
        l.probs_drop = shared.probs_drop;
        if (lim.attention_stats) l.stats = a.take<T>(BAS);
      } else {
        take_probs(l);
      }
      take_rest(l);
    }
    const bool last = &l == &layers.back();
    l.h2 = take_output(residual_copy_only && !last, N * H);
  }
  mlm_x = a.take<T>(Pt * H);
  mlm_pre = a.take<T>(Pt * H);
  mlm_act = a.take<T>(Pt * H);
  mlm_mean = a.take<T>(Pt);
  mlm_rstd = a.take<T>(Pt);
  mlm_norm = a.take<T>(Pt * H);
  mlm_logits = a.take<T>(Pt * V);
  mlm_losses = a.take<T>(Pt);
  mlm_correct = a.take<int32_t>(Pt);
  cls_x = a.take<T>(B * H);
  pool_pre = a.take<T>(B * H);
  pooled = a.take<T>(B * H);
  nsp_logits = a.take<T>(B * 2);
  nsp_losses = a.take<T>(B);
  nsp_correct = a.take<int32_t>(B);
  for (T** p : {&dh, &d_a, &d_b, &d_c, &d_ctx}) *p = a.take<T>(N * H);
  d_qkv = a.take<T>(3 * N * H);
  d_q = d_qkv;
  d_k = d_qkv + H;
  d_v = d_qkv + 2 * H;
  d_ffn = a.take<T>(N * I);
  // The flash backward's scratch is one value per query row (CudaOps: D = d(ctx) . ctx).
  d_probs = a.take<T>(stats_only ? BAS : BASS);
  d_scores = stats_only ? nullptr : a.take<T>(BASS);
  d_mlm_logits = a.take<T>(Pt * V);
  d_m1 = a.take<T>(Pt * H);
  d_m2 = a.take<T>(Pt * H);
  d_nsp_logits = a.take<T>(B * 2);
  d_p1 = a.take<T>(B * H);
  d_p2 = a.take<T>(B * H);
}

template <typename T>
BertModel<T>::BertModel(const BertConfig& config, Ops<T>& ops, ModelLimits limits)
    : config_(config), table_(make_bert_param_table(config)), ops_(ops), limits_(limits) {
  LB_CHECK_MSG(config_.validate().is_ok(), config_.validate().to_string());
  LB_CHECK(limits.max_batch > 0 && limits.max_seq > 0 && limits.max_pred > 0);
  LB_CHECK_MSG(limits.max_seq <= config.max_positions, "sequence longer than the position table");
  LB_CHECK_MSG(!limits.half_activations || ops.half_activations(),
               "16-bit activations (precision.activations: 16bit) need bf16/fp16 GEMMs whose operands lansbert rounds "
               "(Ops::half_activations)");
  params_ = Buffer<T>(table_.total_elements(), ops.allocator());
  grads_ = Buffer<T>(table_.total_elements(), ops.allocator());
  params_.zero();
  grads_.zero();

  state_ = std::make_unique<BertState<T>>();
  BertState<T>& s = *state_;
  s.config = &config_;
  s.ops = &ops_;
  s.params = params_.data();
  s.grads = grads_.data();
  s.half_activations = limits.half_activations;
  s.word = entry(table_, "bert.embeddings.word_embeddings.weight");
  s.pos = entry(table_, "bert.embeddings.position_embeddings.weight");
  s.type = entry(table_, "bert.embeddings.token_type_embeddings.weight");
  s.emb_ln = linear(table_, "bert.embeddings.LayerNorm");
  for (int l = 0; l < config.layers; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l);
    LayerParams lp;
    lp.qkv = packed_qkv(table_, p + ".attention.self.", config.hidden);
    lp.attn_out = linear(table_, p + ".attention.output.dense");
    lp.ln1 = linear(table_, p + ".attention.output.LayerNorm");
    lp.inter = linear(table_, p + ".intermediate.dense");
    lp.out = linear(table_, p + ".output.dense");
    lp.ln2 = linear(table_, p + ".output.LayerNorm");
    s.layer_params.push_back(lp);
  }
  s.pooler = linear(table_, "bert.pooler.dense");
  s.mlm_dense = linear(table_, "cls.predictions.transform.dense");
  s.mlm_ln = linear(table_, "cls.predictions.transform.LayerNorm");
  s.mlm_bias = entry(table_, "cls.predictions.bias");
  s.nsp = linear(table_, "cls.seq_relationship");

  const OutputStorage storage = OutputStorage::of(ops, config_);
  Arena counting;
  s.layout(counting, limits_, storage);
  arena_bytes_ = counting.required();
  arena_buffer_ = Buffer<char>(arena_bytes_, ops.allocator());
  arena_keys_ = AddressRange(counting.key_required());
  Arena real(arena_buffer_.data(), arena_bytes_, arena_keys_.data(), arena_keys_.size());
  s.layout(real, limits_, storage);
}

template <typename T>
BertModel<T>::~BertModel() {
  // The parameters' and activations' memory goes away: no GEMM may be served a copy of it.
  ops_.drop_gemm_operand(params_.data());
  const BertState<T>& s = *state_;
  ops_.drop_gemm_operand(s.emb_out);
  for (const LayerActs<T>& a : s.layers)
    for (const T* x : {a.qkv, a.probs, a.probs_drop, a.ctx, a.res1, a.h1, a.ffn_act, a.res2, a.h2})
      ops_.drop_gemm_operand(x);
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kAttention: return "attention";
    case Recompute::kLayers: return "layers";
  }
  return "?";
}

Status parse_recompute(const std::string& s, Recompute* out) {
  for (Recompute r : {Recompute::kNone, Recompute::kAttention, Recompute::kLayers})
    if (s == recompute_name(r)) {
      *out = r;
      return Status::ok();
    }
  return Status::invalid_argument("batch.recompute: expected none, attention or layers, got '" + s + "'");
}

template <typename T>
void BertModel<T>::release_layer(int l, const T* x) {
  const LayerActs<T>& a = state_->layers[l];
  if (limits_.recompute == Recompute::kAttention) {
    for (const T* p : {a.probs, a.probs_drop}) ops_.drop_gemm_operand(p);
    return;
  }
  for (const T* p : std::initializer_list<const T*>{x, a.qkv, a.probs, a.probs_drop, a.ctx, a.h1, a.ffn_act})
    ops_.drop_gemm_operand(p);
}

template <typename T>
void BertModel<T>::recompute_layer(int l, const T* x) {
  BertState<T>& s = *state_;
  if (limits_.recompute == Recompute::kAttention) {
    // A fused forward's statistics are in the layer's own buffer, and ctx is untouched: its
    // backward has all it needs.
    if (s.layers[l].attn_impl != AttentionImpl::kNative && s.layers[l].stats) return;
    // The attention core again from the kept q/k/v: the probabilities (and ctx, rewritten
    // with the same bits) as the forward made them.
    encoder_layer_attention_forward(s, l);
    return;
  }
  // The forward again, from the layer's input, with the same dropout masks (keyed by the step
  // and the layer): the activations it wrote before, bit for bit. Its output is rewritten with
  // the same values; nothing reads it any more, so its copy is not kept.
  ops_.keep_gemm_operand(x, size_t(s.N) * config_.hidden);
  encoder_layer_forward(s, l, x);
  ops_.drop_gemm_operand(s.layers[l].h2);
}

template <typename T>
size_t BertModel<T>::activation_bytes_for(const BertConfig& config, ModelLimits limits, OutputStorage storage) {
  BertState<T> s;
  s.config = &config;
  Arena counting;
  s.layout(counting, limits, storage);
  return counting.required();
}

template <typename T>
size_t BertModel<T>::kept_copy_bytes_for(const BertConfig& c, ModelLimits lim, bool attention_keeps_operands,
                                         bool attention_keeps_probabilities) {
  const size_t B = lim.max_batch, S = lim.max_seq, N = B * S, H = c.hidden, I = c.intermediate, L = c.layers;
  const size_t Pt = B * lim.max_pred, BASS = attention_keeps_probabilities ? B * c.heads * S * S : 0;
  const size_t attention = attention_keeps_operands ? 3 * N * H + BASS : 0;  // q/k/v, P (or d(scores))
  // Forward: x, ctx, h1 and the GELU output per layer (and the sums below); recomputing
  // layers, one layer's set (x aside) and the L layer inputs (the embeddings' output, h2 of
  // all but the last layer); recomputing the attention, one layer's probabilities.
  // With 16-bit activations (and no whole layer recomputed) the two LayerNorm input sums too
  // (BertState::residual_copy_only).
  const size_t sums = lim.half_activations && lim.recompute != Recompute::kLayers ? 2 * N * H : 0;
  const size_t layer = N * (3 * H + I) + sums + attention;
  size_t forward = L * layer;
  if (lim.recompute == Recompute::kLayers) forward = layer - N * H + L * N * H;
  if (lim.recompute == Recompute::kAttention && attention_keeps_operands) forward = L * (layer - BASS) + BASS;
  // Backward, one set reused by every layer: the dropout/bias gradients of both blocks, d(ctx)
  // and d(q/k/v) (N x 6H), the FFN's (N x I), d(scores); the heads' output gradients (the
  // MLM decoder's and transform's, the NSP classifier's and the pooler's).
  const size_t heads = Pt * (c.vocab_size + H) + B * (H + 2);
  // With 16-bit activations (as the sums above) the gradient stream's two copies, d(x) and d(h1).
  const size_t backward = N * (6 * H + I) + (sums ? 2 * N * H : 0) + (attention_keeps_operands ? BASS : 0) + heads;
  return 2 * (forward + backward);
}

template <typename T>
void BertModel<T>::init_params(uint64_t seed) {
  weight_copy_current_ = false;
  std::vector<T> host(table_.total_elements(), T(0));
  for (size_t t = 0; t < table_.size(); ++t) {
    const ParamEntry& e = table_[t];
    T* p = host.data() + e.offset;
    switch (e.role) {
      case ParamRole::kWeight:
      case ParamRole::kEmbedding: {
        const RngKey key{seed, 0, static_cast<uint32_t>(t)};
        // Each element from its own counter: threads change nothing but the time (bert-large's
        // 336M draws took ~15 s on one core, at the start of every run and bench).
        const int64_t n = int64_t(e.numel);
#pragma omp parallel for schedule(static) if (n > 65536)
        for (int64_t i = 0; i < n; ++i) {
          // Box-Muller on two Philox draws; u1 in (0, 1] keeps the log finite.
          const double u1 = 1.0 - uniform01(philox_bits(key, 2 * i));
          const double u2 = uniform01(philox_bits(key, 2 * i + 1));
          const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
          p[i] = T(z * config_.init_std);
        }
        break;
      }
      case ParamRole::kLayerNormGamma:
        for (size_t i = 0; i < e.numel; ++i) p[i] = T(1);
        break;
      case ParamRole::kBias:
      case ParamRole::kLayerNormBeta:
        break;
    }
  }
  // Hugging Face zeroes the padding row of the word embeddings (padding_idx = [PAD] = 0).
  const ParamEntry* word = table_.find("bert.embeddings.word_embeddings.weight");
  for (int64_t c = 0; c < config_.hidden; ++c) host[word->offset + c] = T(0);
  ops_.allocator().copy_from_host(params_.data(), host.data(), host.size() * sizeof(T));
}

template <typename T>
void BertModel<T>::zero_grads() {
  grads_.zero();
}

template <typename T>
void BertModel<T>::enable_weight_copy(kern::HalfFormat format) {
  if (!weight_copy_.data()) {
    weight_copy_ = Buffer<uint16_t>(table_.total_elements(), ops_.allocator());
    weight_copy_.zero();  // the gaps between tensors are never written by an update
  }
  weight_copy_format_ = format;
  weight_copy_current_ = false;
}

template <typename T>
ForwardResult BertModel<T>::forward(const Batch& batch, const StepContext& ctx) {
  BertState<T>& s = *state_;
  const int B = batch.batch, S = batch.seq_len, P = batch.max_pred, R = batch.rows;
  LB_CHECK(B > 0 && B <= limits_.max_batch && S > 0 && S <= limits_.max_seq && P > 0 && P <= limits_.max_pred);
  LB_CHECK(batch.packed() ? R > 0 && R <= B && batch.sequence_row.size() == size_t(B) &&
                                batch.sequence_start.size() == size_t(B)
                          : R == B);
  s.ops->set_gelu_form(config_.hidden_act);
  const size_t N = size_t(R) * S, Pt = size_t(B) * P;
  LB_CHECK(batch.input_ids.size() == N && batch.segment_ids.size() == N && batch.input_mask.size() == N);
  LB_CHECK(batch.masked_positions.size() == Pt && batch.masked_ids.size() == Pt && batch.nsp_labels.size() == size_t(B));
  s.B = B;
  s.R = R;
  s.S = S;
  s.P = P;
  s.N = int(N);
  s.Pt = int(Pt);
  s.ctx = ctx;
  // The weights are GEMM operands in this forward and again in the backward's dX GEMMs, and do
  // not change in between: kept until the next forward (or the model's end), 16-bit GEMMs
  // cast them once per micro-step instead of at each use, or not at all when the optimizer
  // wrote the weight copy. Kept again here because the optimizer or a checkpoint may have
  // changed them since.
  if (weight_copy_current_)
    ops_.keep_converted_gemm_operand(params_.data(), table_.total_elements(), weight_copy_.data(),
                                     weight_copy_format_);
  else
    ops_.keep_gemm_operand(params_.data(), table_.total_elements());

  // Host-side index arrays; LB_CHECK guards the invariants the loader already validated.
  std::vector<int32_t> pos(N), cls(B), mlm_index(Pt), key_lengths(R);
  for (size_t i = 0; i < N; ++i) {
    LB_CHECK(batch.input_ids[i] >= 0 && batch.input_ids[i] < config_.vocab_size);
    LB_CHECK(batch.segment_ids[i] >= 0 && batch.segment_ids[i] < config_.type_vocab);
    pos[i] = int32_t(i % S);
  }
  s.key_lengths_valid = true;
  for (int r = 0; r < R; ++r) {
    // BERT's mask is ones then zeros; a fused attention takes its lengths instead (a packed
    // row with two sequences or more is not of that form).
    const int32_t* row = batch.input_mask.data() + size_t(r) * S;
    int len = 0;
    while (len < S && row[len] == 1) ++len;
    for (int t = len; t < S; ++t) s.key_lengths_valid &= row[t] == 0;
    s.key_lengths_valid &= len > 0;
    key_lengths[r] = len;
  }
  s.mlm_count = 0;
  for (int b = 0; b < B; ++b) {
    // Where sequence b's tokens are: its own row, or the run of its number in the row packing
    // put it in (data/packing.h), whose positions count from its [CLS].
    int row = b, start = 0, end = S;
    if (batch.packed()) {
      row = batch.sequence_row[b];
      start = batch.sequence_start[b];
      LB_CHECK(row >= 0 && row < R && start >= 0 && start < S);
      const int32_t* m = batch.input_mask.data() + size_t(row) * S;
      const int32_t number = m[start];
      LB_CHECK(number > 0 && (start == 0 || m[start - 1] != number));
      for (end = start; end < S && m[end] == number; ++end) pos[size_t(row) * S + end] = end - start;
    }
    cls[b] = row * S + start;
    for (int p = 0; p < P; ++p) {
      const size_t k = size_t(b) * P + p;
      // An unused slot (label ignored) of a packed sequence reads its [CLS]: where it points
      // may be past the sequence's tokens.
      const int32_t at = batch.packed() && batch.masked_ids[k] < 0 ? 0 : batch.masked_positions[k];
      LB_CHECK(batch.masked_positions[k] >= 0 && at < end - start);
      LB_CHECK(batch.masked_ids[k] < config_.vocab_size);
      mlm_index[k] = row * S + start + at;
      s.mlm_count += batch.masked_ids[k] >= 0;
    }
  }
  Allocator& al = ops_.allocator();
  al.copy_from_host(s.ids, batch.input_ids.data(), N * 4);
  al.copy_from_host(s.seg, batch.segment_ids.data(), N * 4);
  al.copy_from_host(s.mask, batch.input_mask.data(), N * 4);
  al.copy_from_host(s.pos_ids, pos.data(), N * 4);
  al.copy_from_host(s.cls_index, cls.data(), size_t(B) * 4);
  al.copy_from_host(s.mlm_index, mlm_index.data(), Pt * 4);
  al.copy_from_host(s.mlm_labels, batch.masked_ids.data(), Pt * 4);
  al.copy_from_host(s.nsp_labels, batch.nsp_labels.data(), size_t(B) * 4);
  al.copy_from_host(s.key_lengths, key_lengths.data(), size_t(R) * 4);

  embeddings_forward(s);
  const T* x = s.emb_out;
  for (int l = 0; l < config_.layers; ++l) {
    encoder_layer_forward(s, l, x);
    // Recomputation: the next layer overwrites what the backward will recompute, so nothing
    // of it stays kept for 16-bit GEMMs. The last layer's stay as they are for its backward.
    if (limits_.recompute != Recompute::kNone && l + 1 < config_.layers) release_layer(l, x);
    x = s.layers[l].h2;
  }
  heads_forward(s, x);

  // Reduce the per-row losses on the host in a fixed order.
  std::vector<T> mlm_losses(Pt), nsp_losses(B);
  std::vector<int32_t> mlm_correct(Pt), nsp_correct(B);
  al.copy_to_host(mlm_losses.data(), s.mlm_losses, Pt * sizeof(T));
  al.copy_to_host(mlm_correct.data(), s.mlm_correct, Pt * 4);
  al.copy_to_host(nsp_losses.data(), s.nsp_losses, size_t(B) * sizeof(T));
  al.copy_to_host(nsp_correct.data(), s.nsp_correct, size_t(B) * 4);
  ForwardResult r;
  double mlm_sum = 0, nsp_sum = 0;
  for (size_t k = 0; k < Pt; ++k) {
    mlm_sum += mlm_losses[k];
    r.mlm_correct += mlm_correct[k];
  }
  for (int b = 0; b < B; ++b) {
    nsp_sum += nsp_losses[b];
    r.nsp_correct += nsp_correct[b];
  }
  r.mlm_count = s.mlm_count;
  r.nsp_count = B;
  r.mlm_loss = s.mlm_count ? mlm_sum / double(s.mlm_count) : 0.0;
  r.nsp_loss = nsp_sum / B;
  r.total_loss = r.mlm_loss + r.nsp_loss;
  return r;
}

template <typename T>
void BertModel<T>::backward(T loss_weight, const GradReadyFn& on_ready) {
  BertState<T>& s = *state_;
  LB_CHECK_MSG(s.N > 0, "backward without a forward");
  s.ops->set_gelu_form(config_.hidden_act);
  auto index = [&](const ParamEntry* e) { return size_t(e - table_.entries().data()); };
  heads_backward(s, loss_weight);
  // The gradient stream between the layers in 16 bits (16-bit activations): held as copies
  // where the residual stream is (the heads' fp32 d(hidden) cast into its copy here), rounded
  // as read and stored otherwise; the embeddings then read it in fp32 at that rounding.
  const size_t NH = size_t(s.N) * config_.hidden;
  if (s.residual_copy_only) s.ops->keep_gemm_operand(s.dh, NH);
  if (on_ready) on_ready(index(s.pooler.w), table_.size());
  for (int l = config_.layers - 1; l >= 0; --l) {
    const T* x = l == 0 ? s.emb_out : s.layers[l - 1].h2;
    if (limits_.recompute != Recompute::kNone && l + 1 < config_.layers) recompute_layer(l, x);
    encoder_layer_backward(s, l, x);
    const LayerParams& p = s.layer_params[l];
    if (on_ready) on_ready(index(p.qkv.w), index(p.ln2.b) + 1);
  }
  if (s.residual_copy_only) {
    s.ops->widen_kept(s.dh, NH);
    s.ops->drop_gemm_operand(s.dh);
    s.ops->drop_gemm_operand(s.d_a);
  } else if (s.half_activations) {
    s.ops->round_to_gemm_half(s.dh, NH);
  }
  embeddings_backward(s);  // the word embeddings also took the tied decoder's gradient
  if (on_ready) on_ready(0, index(s.layer_params.empty() ? s.pooler.w : s.layer_params[0].qkv.w));
}

template class BertModel<float>;
template class BertModel<double>;
template struct BertState<float>;
template struct BertState<double>;

}  // namespace lansbert
