// Hugging Face's config.json for BERT, written and read (see hf_config.h).
#include "lansbert/model/hf_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lansbert/core/file_io.h"
#include "lansbert/core/float_text.h"
#include "lansbert/core/json_reason.h"

namespace lansbert {

std::string hf_config_json(const BertConfig& c, const char* torch_dtype) {
  nlohmann::ordered_json j = {
      {"architectures", {"BertForPreTraining"}},
      {"model_type", "bert"},
      {"attention_probs_dropout_prob", decimal_of(c.attention_dropout)},
      {"hidden_act", hf_hidden_act_name(c.hidden_act)},
      {"hidden_dropout_prob", decimal_of(c.hidden_dropout)},
      {"hidden_size", c.hidden},
      {"initializer_range", decimal_of(c.init_std)},
      {"intermediate_size", c.intermediate},
      {"layer_norm_eps", decimal_of(c.layernorm_eps)},
      {"max_position_embeddings", c.max_positions},
      {"num_attention_heads", c.heads},
      {"num_hidden_layers", c.layers},
      {"pad_token_id", 0},
      {"position_embedding_type", "absolute"},
      {"tie_word_embeddings", true},
      {"torch_dtype", torch_dtype},
      {"type_vocab_size", c.type_vocab},
      {"vocab_size", c.vocab_size}};
  return j.dump(2) + "\n";
}

namespace {

// Reads the fields of one config.json object, each error naming the file and the field.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& j, const std::string& path) : j_(j), path_(path) {}

  // A positive integer of at most `most`: bounds far above any BERT, so that a typo cannot
  // make the model's tables and memory estimate (sized before any check of memory) run for
  // minutes.
  Status size(const char* field, int* v, int64_t most) const {
    if (!j_.contains(field)) return Status::ok();  // transformers' default, already in *v
    const nlohmann::json& x = j_[field];
    if (!x.is_number_integer() || x.get<int64_t>() <= 0 || x.get<int64_t>() > most)
      return bad(field, "an integer in [1, " + std::to_string(most) + "]", x);
    *v = x.get<int>();
    return Status::ok();
  }
  // A float in [lo, hi) (lo < x when lo_open).
  Status real(const char* field, float* v, double lo, double hi, bool lo_open) const {
    if (!j_.contains(field)) return Status::ok();
    const nlohmann::json& x = j_[field];
    const double d = x.is_number() ? x.get<double>() : -1.0;
    const float f = float(d);  // what the model computes with: 1e-300 is 0 there
    if (!x.is_number() || (lo_open ? !(d > lo && f > lo) : !(d >= lo)) || !(d < hi && f < hi))
      return bad(field,
                 "a number in " + std::string(lo_open ? "(" : "[") + num(lo) + ", " + num(hi) + ")", x);
    *v = f;
    return Status::ok();
  }
  // A string.
  Status text(const char* field, std::string* v) const {
    if (!j_.contains(field)) return Status::ok();
    if (!j_[field].is_string()) return bad(field, "a string", j_[field]);
    *v = j_[field].get<std::string>();
    return Status::ok();
  }
  Status refuse(const char* field, const std::string& why) const {
    return Status::invalid_argument(path_ + ": field '" + field + "': " + why);
  }

 private:
  Status bad(const char* field, const std::string& expected, const nlohmann::json& got) const {
    return refuse(field, "expected " + expected + ", got " + got.dump());
  }
  static std::string num(double d) {
    std::string s = nlohmann::json(d).dump();
    return s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0 ? s.substr(0, s.size() - 2) : s;
  }
  const nlohmann::json& j_;
  const std::string& path_;
};

// transformers' names of the two GELU forms lansbert computes.
bool hf_gelu_form(const std::string& name, kern::GeluForm* out) {
  if (name == "gelu" || name == "gelu_python") {
    *out = kern::GeluForm::kErf;
  } else if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") {
    *out = kern::GeluForm::kTanh;  // the same tanh approximation, written three ways
  } else {
    return false;
  }
  return true;
}

}  // namespace

Status parse_hf_config(const std::string& text, const std::string& path, BertConfig* out) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann counts bytes from 1: the offset of the byte it stopped at (the length at the end)
    return Status::invalid_argument(path + ": not JSON (at byte offset " + std::to_string(e.byte - 1) + ")");
  } catch (const nlohmann::json::out_of_range& e) {  // a number beyond a double: 1e309
    return Status::invalid_argument(path + ": a JSON number beyond a double's range (" + json_reason(e) + ")");
  }
  if (!j.is_object()) return Status::invalid_argument(path + ": not a JSON object (a Hugging Face config.json)");
  const FieldReader f(j, path);
  std::string model_type = "bert", position_type = "absolute", act = "gelu";
  LB_RETURN_IF_ERROR(f.text("model_type", &model_type));
  if (model_type != "bert")
    return f.refuse("model_type", "'" + model_type + "' is not BERT (lansbert reads model_type \"bert\")");
  LB_RETURN_IF_ERROR(f.text("position_embedding_type", &position_type));
  if (position_type != "absolute")
    return f.refuse("position_embedding_type",
                    "'" + position_type + "': lansbert's BERT has absolute position embeddings only");
  BertConfig c;  // its defaults are transformers' BertConfig defaults
  LB_RETURN_IF_ERROR(f.size("vocab_size", &c.vocab_size, 1 << 24));
  LB_RETURN_IF_ERROR(f.size("hidden_size", &c.hidden, 1 << 16));
  LB_RETURN_IF_ERROR(f.size("num_hidden_layers", &c.layers, 1 << 12));
  LB_RETURN_IF_ERROR(f.size("num_attention_heads", &c.heads, 1 << 12));
  LB_RETURN_IF_ERROR(f.size("intermediate_size", &c.intermediate, 1 << 20));
  LB_RETURN_IF_ERROR(f.size("max_position_embeddings", &c.max_positions, 1 << 16));
  LB_RETURN_IF_ERROR(f.size("type_vocab_size", &c.type_vocab, 1 << 16));
  // lansbert's MLM decoder is the word embeddings (tied, as in BERT): a model with a decoder
  // of its own would be scored with the wrong one.
  if (j.contains("tie_word_embeddings") && !(j["tie_word_embeddings"].is_boolean() && j["tie_word_embeddings"]))
    return f.refuse("tie_word_embeddings", "expected true (lansbert's MLM decoder is the word embeddings), got " +
                                               j["tie_word_embeddings"].dump());
  LB_RETURN_IF_ERROR(f.real("layer_norm_eps", &c.layernorm_eps, 0, 1, /*lo_open=*/true));
  LB_RETURN_IF_ERROR(f.real("hidden_dropout_prob", &c.hidden_dropout, 0, 1, false));
  LB_RETURN_IF_ERROR(f.real("attention_probs_dropout_prob", &c.attention_dropout, 0, 1, false));
  LB_RETURN_IF_ERROR(f.real("initializer_range", &c.init_std, 0, 1e3, true));
  LB_RETURN_IF_ERROR(f.text("hidden_act", &act));
  if (!hf_gelu_form(act, &c.hidden_act))
    return f.refuse("hidden_act", "'" + act + "': lansbert computes GELU, as \"gelu\" (erf) or \"gelu_new\" "
                                  "(tanh; also \"gelu_pytorch_tanh\", \"gelu_fast\")");
  if (c.hidden % c.heads != 0)
    return f.refuse("num_attention_heads", std::to_string(c.heads) + " heads do not divide hidden_size " +
                                               std::to_string(c.hidden));
  LB_RETURN_IF_ERROR(c.validate().with_prefix(path + ": "));  // a backstop: the checks above cover it
  *out = c;
  return Status::ok();
}

std::string pytorch_weights_hint(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "pytorch_model.bin", ec)) return "";
  return "; it holds pytorch_model.bin, which lansbert does not read: BertForPreTraining.from_pretrained(DIR)"
         ".save_pretrained(DIR, safe_serialization=True) in transformers writes its model.safetensors";
}

Status read_hf_config(const std::string& path, BertConfig* out) {
  std::string text;
  LB_RETURN_IF_ERROR(read_file(path, &text));
  return parse_hf_config(text, path, out);
}

}  // namespace lansbert
