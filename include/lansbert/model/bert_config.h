// BertConfig: the sizes of a BERT model, the named presets, and the parameter table they
// imply (Hugging Face BertForPreTraining names, weights as [out, in]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/kernels/activations.h"
#include "lansbert/model/param_table.h"

namespace lansbert {

// Upper bounds BertConfig::validate enforces before anything is sized from a config.
inline constexpr int kMaxLayers = 4096;  // as a Hugging Face config.json is bounded
inline constexpr double kMaxParameters = 68719476736.0;  // 2^36: 275 GB of fp32 weights per rank

struct BertConfig {
  int vocab_size = 30522;
  int hidden = 768;        // H
  int layers = 12;         // L
  int heads = 12;          // A; H % A == 0
  int intermediate = 3072; // I
  int max_positions = 512;
  int type_vocab = 2;
  float layernorm_eps = 1e-12f;
  float hidden_dropout = 0.1f;     // embeddings, attention output, FFN output
  float attention_dropout = 0.1f;  // attention probabilities
  float init_std = 0.02f;
  // The FFN's and the MLM transform's activation: GELU in its erf form (Hugging Face's "gelu",
  // the default) or its tanh approximation (`model.hidden_act: gelu_tanh`; Hugging Face's
  // "gelu_new", what Google's original BERT code computes). With bf16/fp16 GEMMs and 16-bit
  // activations the CUDA backend fuses the tanh form into the FFN's GEMMs (cuBLASLt's GELU
  // epilogues, which have no erf form): two passes over [N, I] fewer a layer.
  kern::GeluForm hidden_act = kern::GeluForm::kErf;

  int head_dim() const { return hidden / heads; }
  // Checks divisibility and positivity; names the offending field.
  Status validate() const;
};

// Presets: bert-tiny (L2 H128 A2 I512), bert-mini (L4 H256 A4 I1024), bert-small (L4 H512 A8
// I2048), bert-medium (L8 H512 A8 I2048) as in Turc et al. 2019 ("Well-read students learn
// better"), bert-base (L12 H768 A12 I3072) and bert-large (L24 H1024 A16 I4096) as in Devlin
// et al. 2019.
Status bert_preset(const std::string& name, BertConfig* out);

// "gelu" / "gelu_tanh": the config's names of the forms. parse_hidden_act also takes Hugging
// Face's names of the tanh form ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"); its error
// lists the names.
const char* hidden_act_name(kern::GeluForm f);
Status parse_hidden_act(const std::string& s, kern::GeluForm* out);
// Hugging Face's config.json name of the form ("gelu" / "gelu_new").
const char* hf_hidden_act_name(kern::GeluForm f);

// The parameter table of BertForPreTraining in Hugging Face order and names. The MLM decoder
// weight is tied to bert.embeddings.word_embeddings.weight and has no entry of its own.
ParamTable make_bert_param_table(const BertConfig& c);

}  // namespace lansbert
