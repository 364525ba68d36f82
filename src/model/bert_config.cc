// Presets, validation and the BertForPreTraining parameter table.
#include "lansbert/model/bert_config.h"

#include <cstdio>
#include <string>

namespace lansbert {

Status BertConfig::validate() const {
  auto positive = [](int v, const char* field) -> Status {
    if (v <= 0) return Status::invalid_argument(std::string("model.") + field + " must be positive, got " + std::to_string(v));
    return Status::ok();
  };
  LB_RETURN_IF_ERROR(positive(vocab_size, "vocab_size"));
  LB_RETURN_IF_ERROR(positive(hidden, "hidden"));
  LB_RETURN_IF_ERROR(positive(layers, "layers"));
  LB_RETURN_IF_ERROR(positive(heads, "heads"));
  LB_RETURN_IF_ERROR(positive(intermediate, "intermediate"));
  LB_RETURN_IF_ERROR(positive(max_positions, "max_positions"));
  LB_RETURN_IF_ERROR(positive(type_vocab, "type_vocab"));
  // Bounds checked before anything is sized from the config: a typo of a few digits would
  // otherwise build a parameter table of millions of layers (or sizes past 64 bits) before any
  // memory check could name the field.
  if (layers > kMaxLayers)
    return Status::invalid_argument("model.layers " + std::to_string(layers) + ": at most " +
                                    std::to_string(kMaxLayers) + " (bert-large has 24)");
  const double H = hidden, I = intermediate;
  const double count = (double(vocab_size) + max_positions + type_vocab + 2) * H +
                       double(layers) * (4 * H * H + 2 * H * I + 9 * H + I) + 2 * H * H + 6 * H + vocab_size + 2;
  if (count > kMaxParameters) {
    char msg[320];
    std::snprintf(msg, sizeof msg,
                  "model: %.4g billion parameters (vocab_size %d, hidden %d, layers %d, intermediate %d), more than "
                  "the %.1f billion a data-parallel run can hold: each rank keeps every weight (bert-large has 0.34 "
                  "billion)", count / 1e9, vocab_size, hidden, layers, intermediate, kMaxParameters / 1e9);
    return Status::invalid_argument(msg);
  }
  if (hidden % heads != 0)
    return Status::invalid_argument("model.hidden (" + std::to_string(hidden) +
                                    ") must be divisible by model.heads (" + std::to_string(heads) + ")");
  if (!(hidden_dropout >= 0 && hidden_dropout < 1))
    return Status::invalid_argument("model.hidden_dropout must be in [0, 1)");
  if (!(attention_dropout >= 0 && attention_dropout < 1))
    return Status::invalid_argument("model.attention_dropout must be in [0, 1)");
  if (!(layernorm_eps > 0)) return Status::invalid_argument("layer_norm_eps (config.json) must be positive");
  if (!(init_std > 0 && init_std < 1e3f)) return Status::invalid_argument("model.init_std must be positive (BERT: 0.02)");
  return Status::ok();
}

namespace {
struct Preset {
  const char* name;
  int layers, hidden, heads, intermediate;
};
constexpr Preset kPresets[] = {
    {"bert-tiny", 2, 128, 2, 512},     {"bert-mini", 4, 256, 4, 1024},
    {"bert-small", 4, 512, 8, 2048},   {"bert-medium", 8, 512, 8, 2048},
    {"bert-base", 12, 768, 12, 3072},  {"bert-large", 24, 1024, 16, 4096},
};
}  // namespace

const char* hidden_act_name(kern::GeluForm f) { return f == kern::GeluForm::kTanh ? "gelu_tanh" : "gelu"; }
const char* hf_hidden_act_name(kern::GeluForm f) { return f == kern::GeluForm::kTanh ? "gelu_new" : "gelu"; }

Status parse_hidden_act(const std::string& s, kern::GeluForm* out) {
  if (s == "gelu") {
    *out = kern::GeluForm::kErf;
  } else if (s == "gelu_tanh" || s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast") {
    *out = kern::GeluForm::kTanh;  // transformers' three names of the one tanh form, as config.json takes them
  } else {
    return Status::invalid_argument("model.hidden_act: unknown activation '" + s +
                                    "' (expected gelu, the erf form, or gelu_tanh, the tanh approximation, "
                                    "also called gelu_new, gelu_pytorch_tanh or gelu_fast)");
  }
  return Status::ok();
}

Status bert_preset(const std::string& name, BertConfig* out) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      BertConfig c;
      c.layers = p.layers;
      c.hidden = p.hidden;
      c.heads = p.heads;
      c.intermediate = p.intermediate;
      *out = c;
      return Status::ok();
    }
  }
  std::string known;
  for (const Preset& p : kPresets) known += std::string(known.empty() ? "" : ", ") + p.name;
  return Status::invalid_argument("unknown model preset '" + name + "' (known: " + known + ")");
}

ParamTable make_bert_param_table(const BertConfig& c) {
  const int64_t H = c.hidden, I = c.intermediate;
  ParamTable t;
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in) {
    t.add(prefix + ".weight", {out, in}, ParamRole::kWeight);
    t.add(prefix + ".bias", {out}, ParamRole::kBias);
  };
  auto layernorm = [&](const std::string& prefix) {
    t.add(prefix + ".weight", {H}, ParamRole::kLayerNormGamma);
    t.add(prefix + ".bias", {H}, ParamRole::kLayerNormBeta);
  };
  t.add("bert.embeddings.word_embeddings.weight", {c.vocab_size, H}, ParamRole::kEmbedding);
  t.add("bert.embeddings.position_embeddings.weight", {c.max_positions, H}, ParamRole::kEmbedding);
  t.add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab, H}, ParamRole::kEmbedding);
  layernorm("bert.embeddings.LayerNorm");
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l);
    // Query, key and value as one [3H, H] weight and one [3H] bias (packed: no gaps), so the
    // projection is one GEMM reading its input once (bert_model_impl.h's qkv). The names and
    // shapes stay Hugging Face's three tensors; only their place in the flat buffers differs.
    const std::string self = p + ".attention.self.";
    t.add(self + "query.weight", {H, H}, ParamRole::kWeight);
    t.add_packed(self + "key.weight", {H, H}, ParamRole::kWeight);
    t.add_packed(self + "value.weight", {H, H}, ParamRole::kWeight);
    t.add(self + "query.bias", {H}, ParamRole::kBias);
    t.add_packed(self + "key.bias", {H}, ParamRole::kBias);
    t.add_packed(self + "value.bias", {H}, ParamRole::kBias);
    linear(p + ".attention.output.dense", H, H);
    layernorm(p + ".attention.output.LayerNorm");
    linear(p + ".intermediate.dense", I, H);
    linear(p + ".output.dense", H, I);
    layernorm(p + ".output.LayerNorm");
  }
  linear("bert.pooler.dense", H, H);
  linear("cls.predictions.transform.dense", H, H);
  layernorm("cls.predictions.transform.LayerNorm");
  t.add("cls.predictions.bias", {c.vocab_size}, ParamRole::kBias);
  linear("cls.seq_relationship", 2, H);
  return t;
}

}  // namespace lansbert
