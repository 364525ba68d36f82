// The FLOP count of one BERT pretraining step, for throughput reports (bench, trainer).
// Only matrix multiplications are counted (2 FLOPs per multiply-add), as MFU conventions do
// (Chowdhery et al. 2022, PaLM appendix B; Korthikanti et al. 2022). Per sequence of S tokens:
//   each encoder layer, forward: Q,K,V and output projections 8*S*H^2, attention scores and
//     context 4*S^2*H, feed-forward 4*S*H*I
//   MLM head at P masked slots: transform 2*P*H^2, tied decoder 2*P*H*V
//   pooler and NSP classifier: 2*H^2 + 4*H
//   backward = 2 x forward (input and weight gradients), so a training step = 3 x forward.
#pragma once

#include "lansbert/model/bert_config.h"

namespace lansbert {

// FLOPs of the forward pass of the encoder (embeddings excluded) over one row of S positions.
inline double bert_encoder_forward_flops(const BertConfig& c, double S) {
  const double H = c.hidden, I = c.intermediate;
  return c.layers * (8 * S * H * H + 4 * S * S * H + 4 * S * H * I);
}

// FLOPs of the forward pass of the pretraining heads for one sequence with P masked slots.
inline double bert_heads_forward_flops(const BertConfig& c, double P) {
  const double H = c.hidden, V = c.vocab_size;
  return 2 * P * H * H + 2 * P * H * V + 2 * H * H + 4 * H;
}

// FLOPs of the forward pass for a batch of B sequences of S tokens with P masked slots each.
inline double bert_forward_flops(const BertConfig& c, double B, double S, double P) {
  return B * (bert_encoder_forward_flops(c, S) + bert_heads_forward_flops(c, P));
}

// Forward + backward of a packed batch (data/packing.h): the encoder computes on R rows, the
// heads on B sequences (R = B when not packed).
inline double bert_packed_train_flops(const BertConfig& c, double R, double B, double S, double P) {
  return 3 * (R * bert_encoder_forward_flops(c, S) + B * bert_heads_forward_flops(c, P));
}

// Forward + backward.
inline double bert_train_flops(const BertConfig& c, double B, double S, double P) {
  return 3 * bert_forward_flops(c, B, S, P);
}

}  // namespace lansbert
