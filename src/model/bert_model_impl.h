// The private state of BertModel: where each parameter lives, and the activation and
// scratch tensors laid out in the arena. Shapes use N = B*S tokens and Pt = B*P masked slots.
#pragma once

#include <vector>

#include "lansbert/core/arena.h"
#include "lansbert/model/bert_model.h"

namespace lansbert {

struct LinearParams {
  const ParamEntry* w = nullptr;
  const ParamEntry* b = nullptr;
};

struct LayerParams {
  // qkv: the packed query, key and value weight [3H, H] and bias [3H]: the query entries,
  // which the key's and the value's follow without gaps (make_bert_param_table; checked
  // when the model is built).
  LinearParams qkv, attn_out, inter, out;
  LinearParams ln1, ln2;  // w = gamma, b = beta
};

template <typename T>
struct LayerActs {
  // (N, 3H): token t's query, key and value are columns [0, H), [H, 2H), [2H, 3H) of row t,
  // one GEMM's output; q, k, v point at the three column blocks (row stride 3H).
  T* qkv;
  T *q, *k, *v;
  // probs_drop and ffn_act (and q/k/v and ctx where the attention reads them only as GEMM
  // operands or kept copies) are read only by GEMMs. Where the ops keep them as 16-bit copies
  // without writing them (Ops::kept_outputs_unwritten) they have no memory of their own:
  // probs_drop == probs and (fp32 activations) ffn_act == ffn_pre, addresses that key the kept
  // copies (GEMMs given them read the dropped-out probabilities and the GELU output) while the
  // fp32 memory holds the probabilities and the GELU input, which the backward reads directly;
  // the others are keys only (OutputStorage, Arena::take_key: an access faults).
  T *probs, *probs_drop;     // (B, A, S, S)
  T* stats = nullptr;        // (B, A, S): a fused attention's statistics (ModelLimits::attention_stats)
  T* ctx;                    // (N, H)
  T *res1, *mean1, *rstd1;   // (N, H), (N), (N): LN1 input and statistics
  T* h1;                     // (N, H)
  T *ffn_pre, *ffn_act;      // (N, I); ffn_pre null with 16-bit activations
  // (N, I) in 16 bits with ModelLimits::half_activations: the pre-activation, in place of ffn_pre.
  uint16_t* ffn_pre16 = nullptr;
  T *res2, *mean2, *rstd2;   // (N, H), (N), (N)
  T* h2;                     // (N, H): the layer's output
  // Which attention the forward ran (what `probs` holds), for the backward.
  AttentionImpl attn_impl = AttentionImpl::kNative;
};

template <typename T>
struct BertState {
  const BertConfig* config;
  Ops<T>* ops;
  T* params;  // flat buffers of the owning model
  T* grads;
  T* p(const ParamEntry* e) const { return params + e->offset; }
  T* g(const ParamEntry* e) const { return grads + e->offset; }

  // Parameters by role.
  const ParamEntry *word, *pos, *type;
  LinearParams emb_ln;
  std::vector<LayerParams> layer_params;
  LinearParams pooler, mlm_dense, mlm_ln, nsp;
  const ParamEntry* mlm_bias;

  // ModelLimits::half_activations: the FFN's 16-bit pre-activation (LayerActs::ffn_pre16),
  // d(q, k, v) kept in 16 bits where the attention can write it so, and the encoder's residual
  // adds using the previous LayerNorm's output at its 16-bit rounding
  // (ResidualLayerNorm::residual_half), and the LayerNorms' input sums at that rounding
  // (ResidualLayerNorm::sum_half), as Megatron-LM keeps the residual stream in bf16; in the
  // backward the gradient stream between the block ends (dh, d_a) at that rounding too
  // (ResidualLayerNormGrad::grad_half).
  bool half_activations = false;
  // With 16-bit activations, kept copies whose fp32 is unwritten and no whole layer recomputed
  // (which drops the layer inputs' copies): those LayerNorm outputs (h1, and h2 but the last
  // layer's, which the heads read) are written only as their copies and hold no fp32 memory
  // (ResidualLayerNorm::out_copy_only). So are the dense layers' outputs res1 and res2, the
  // LayerNorms' input sums: produced as kept 16-bit copies (Ops::gemm_kept), summed in place and
  // read back by the backward from there (ResidualLayerNorm::sum_copy_only); each is dropped
  // once its backward has read it. In the backward the gradient stream dh / d_a is held only as
  // copies too (ResidualLayerNormGrad::grad_copy_only, Ops::gemm_accumulate_kept), from the
  // heads' d(hidden) to the embeddings' input gradient. Set by layout().
  bool residual_copy_only = false;
  // Sizes of the current forward: B sequences in R token rows (R < B when packed) of S
  // positions, N = R * S tokens, P masked slots per sequence, Pt = B * P.
  int B = 0, R = 0, S = 0, P = 0, N = 0, Pt = 0;
  StepContext ctx;
  int64_t mlm_count = 0;

  // Inputs on the device.
  int32_t *ids, *seg, *mask, *pos_ids, *cls_index, *mlm_index, *mlm_labels, *nsp_labels;
  // Real tokens per row (R), valid when every mask row is ones then zeros with at least
  // one one (attention.h's key_lengths: what fused attention kernels take).
  int32_t* key_lengths;
  bool key_lengths_valid = false;
  // Embeddings: sum of the three lookups, LN statistics, output after LN and dropout.
  T *emb_sum, *emb_mean, *emb_rstd, *emb_out;  // (N, H), (N), (N), (N, H)
  std::vector<LayerActs<T>> layers;
  // MLM head at the masked slots.
  T *mlm_x, *mlm_pre, *mlm_act, *mlm_mean, *mlm_rstd, *mlm_norm;  // (Pt, H) / (Pt)
  T* mlm_logits;                                               // (Pt, V)
  T* mlm_losses;                                               // (Pt)
  int32_t* mlm_correct;                                        // (Pt)
  // Pooler and NSP head.
  T *cls_x, *pool_pre, *pooled;  // (B, H)
  T* nsp_logits;                 // (B, 2)
  T* nsp_losses;                 // (B)
  int32_t* nsp_correct;          // (B)
  // Backward scratch, shared by all layers.
  T *dh, *d_a, *d_b, *d_c, *d_ctx;                   // (N, H)
  T* d_qkv;                                          // (N, 3H), laid out as qkv
  T *d_q, *d_k, *d_v;                                // its column blocks
  T* d_ffn;                                          // (N, I); doubles as gemm_bias_half's forward scratch
  T *d_probs, *d_scores;                             // (B, A, S, S); d_scores doubles as forward scores
  T* d_mlm_logits;                                   // (Pt, V)
  T *d_m1, *d_m2;                                    // (Pt, H)
  T* d_nsp_logits;                                   // (B, 2)
  T *d_p1, *d_p2;                                    // (B, H)

  // storage: what the ops the model runs on write of outputs only GEMMs read.
  void layout(Arena& a, const ModelLimits& lim, OutputStorage storage);
};

// Forward and backward of the parts (encoder_layer.cc, embeddings.cc, pretraining_heads.cc).
template <typename T>
void encoder_layer_forward(BertState<T>& m, int l, const T* x);
template <typename T>
void encoder_layer_backward(BertState<T>& m, int l, const T* x);  // m.dh: d(out) in, d(x) out
// The attention core of layer l's forward alone (q/k/v -> probabilities, ctx), as
// encoder_layer_forward runs it: for Recompute::kAttention.
template <typename T>
void encoder_layer_attention_forward(BertState<T>& m, int l);
template <typename T>
void embeddings_forward(BertState<T>& m);
template <typename T>
void embeddings_backward(BertState<T>& m);  // m.dh: d(emb_out) in
template <typename T>
void heads_forward(BertState<T>& m, const T* hidden);
template <typename T>
void heads_backward(BertState<T>& m, T loss_weight);  // m.dh: d(hidden) out

// Dropout stream sites: embeddings 0, then three per layer.
inline uint32_t dropout_site_embeddings() { return 0; }
inline uint32_t dropout_site(int layer, int which) { return 1 + 3 * uint32_t(layer) + uint32_t(which); }

}  // namespace lansbert
