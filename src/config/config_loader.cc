// The schema-driven YAML loader of TrainConfig. Each key path is one Field whose setter
// converts a YAML node to the field's type; the walker descends the known sections, so an
// unknown key, a scalar where a section belongs or a value of the wrong type is reported
// with the file, line and column yaml-cpp recorded for it. Cross-field rules live in
// TrainConfig::validate (train layer); their key is looked up here to add its line.
#include "lansbert/config/config_loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <type_traits>

#include "lansbert/core/file_io.h"
#include "lansbert/core/nearest_name.h"

namespace lansbert {
namespace {

using Setter = std::function<Status(const YAML::Node&, TrainConfig&)>;
struct Field {
  const char* path;
  Setter set;
};

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  return n.IsSequence() ? "a list" : n.IsMap() ? "a mapping" : "nothing (null)";  // `key:` or `key: ~`
}
Status type_error(const YAML::Node& n, const char* expected) {
  return Status::invalid_argument(std::string("expected ") + expected + ", got " + scalar_text(n));
}

template <typename T>
Status get_int(const YAML::Node& n, T* out) {
  if (!n.IsScalar()) return type_error(n, "an integer");
  try {
    const long long v = n.as<long long>();
    const bool fits = std::is_unsigned_v<T>
                          ? v >= 0
                          : v >= (long long)std::numeric_limits<T>::min() &&
                                v <= (long long)std::numeric_limits<T>::max();
    if (!fits) return Status::invalid_argument("integer " + n.Scalar() + " out of range");
    *out = T(v);
    return Status::ok();
  } catch (const YAML::Exception&) {
    return type_error(n, "an integer");
  }
}
template <typename T>
Status get_num(const YAML::Node& n, T* out) {
  if (!n.IsScalar()) return type_error(n, "a number");
  try {
    *out = T(n.as<double>());
    return Status::ok();
  } catch (const YAML::Exception&) {
    return type_error(n, "a number");
  }
}
Status get_bool(const YAML::Node& n, bool* out) {
  if (!n.IsScalar()) return type_error(n, "true or false");
  try {
    *out = n.as<bool>();
    return Status::ok();
  } catch (const YAML::Exception&) {
    return type_error(n, "true or false");
  }
}
Status get_str(const YAML::Node& n, std::string* out) {
  if (!n.IsScalar()) return type_error(n, "a string");
  *out = n.Scalar();
  return Status::ok();
}
Status get_list(const YAML::Node& n, std::vector<std::string>* out) {
  out->clear();
  if (n.IsScalar()) {
    out->push_back(n.Scalar());
    return Status::ok();
  }
  if (!n.IsSequence()) return type_error(n, "a list of strings");
  for (const YAML::Node& e : n) {
    if (!e.IsScalar()) return type_error(e, "a list of strings");
    out->push_back(e.Scalar());
  }
  return Status::ok();
}
Status get_num_list(const YAML::Node& n, std::vector<double>* out) {
  out->clear();
  if (n.IsScalar()) {  // `--set data.weights=1` as a list of one, as get_list takes a string
    out->emplace_back();
    return get_num(n, &out->back());
  }
  if (!n.IsSequence()) return type_error(n, "a list of numbers");
  for (const YAML::Node& e : n) {
    if (!e.IsScalar()) return type_error(e, "a list of numbers");
    out->emplace_back();
    LB_RETURN_IF_ERROR(get_num(e, &out->back()));
  }
  return Status::ok();
}
template <typename T>
Status get_opt_int(const YAML::Node& n, std::optional<T>* out) {
  T v{};
  LB_RETURN_IF_ERROR(get_int(n, &v));
  *out = v;
  return Status::ok();
}
Status get_opt_float(const YAML::Node& n, std::optional<float>* out) {
  float v{};
  LB_RETURN_IF_ERROR(get_num(n, &v));
  *out = v;
  return Status::ok();
}
Status get_roles(const YAML::Node& n, std::vector<ParamRole>* out) {
  std::vector<std::string> names;
  LB_RETURN_IF_ERROR(get_list(n, &names));
  out->clear();
  const ParamRole all[] = {ParamRole::kWeight, ParamRole::kEmbedding, ParamRole::kBias,
                           ParamRole::kLayerNormGamma, ParamRole::kLayerNormBeta};
  for (const std::string& s : names) {
    bool found = false;
    for (ParamRole r : all)
      if (s == param_role_name(r)) out->push_back(r), found = true;
    if (!found)
      return Status::invalid_argument("unknown parameter role '" + s +
                                      "' (expected weight, embedding, bias, layernorm_gamma, layernorm_beta)");
  }
  return Status::ok();
}
template <typename E>
Status get_enum(const YAML::Node& n, E* out, Status (*parse)(const std::string&, E*)) {
  std::string s;
  LB_RETURN_IF_ERROR(get_str(n, &s));
  Status st = parse(s, out);
  if (st.is_ok()) return st;
  // Drop the parser's own key prefix ("schedule.kind: ..."); the caller adds the path.
  const std::string& m = st.message();
  const size_t colon = m.find(": ");
  return Status::invalid_argument(colon == std::string::npos ? m : m.substr(colon + 2));
}

template <typename E>
Status get_opt_enum(const YAML::Node& n, std::optional<E>* out, Status (*parse)(const std::string&, E*)) {
  E v{};
  LB_RETURN_IF_ERROR(get_enum(n, &v, parse));
  *out = v;
  return Status::ok();
}

#define LB_F(path, expr) Field{path, [](const YAML::Node& n, TrainConfig& c) { return expr; }}

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      LB_F("model.preset", get_str(n, &c.model.preset)),
      LB_F("model.vocab_size", get_opt_int(n, &c.model.vocab_size)),
      LB_F("model.hidden", get_opt_int(n, &c.model.hidden)),
      LB_F("model.layers", get_opt_int(n, &c.model.layers)),
      LB_F("model.heads", get_opt_int(n, &c.model.heads)),
      LB_F("model.intermediate", get_opt_int(n, &c.model.intermediate)),
      LB_F("model.max_positions", get_opt_int(n, &c.model.max_positions)),
      LB_F("model.hidden_dropout", get_opt_float(n, &c.model.hidden_dropout)),
      LB_F("model.attention_dropout", get_opt_float(n, &c.model.attention_dropout)),
      LB_F("model.init_std", get_opt_float(n, &c.model.init_std)),
      LB_F("model.hidden_act", get_opt_enum(n, &c.model.hidden_act, parse_hidden_act)),
      LB_F("data.train", get_list(n, &c.data.train)),
      LB_F("data.eval", get_list(n, &c.data.eval)),
      LB_F("data.weights", get_num_list(n, &c.data.weights)),
      LB_F("data.format", get_str(n, &c.data.format)),
      LB_F("data.seq_len", get_int(n, &c.data.seq_len)),
      LB_F("data.max_pred", get_int(n, &c.data.max_pred)),
      LB_F("data.masking", get_str(n, &c.data.masking)),
      LB_F("data.whole_word", get_bool(n, &c.data.whole_word)),
      LB_F("data.vocab", get_str(n, &c.data.vocab)),
      LB_F("data.packing", get_bool(n, &c.data.packing)),
      LB_F("batch.global_batch", get_int(n, &c.batch.global_batch)),
      LB_F("batch.micro_batch", get_int(n, &c.batch.micro_batch)),
      LB_F("batch.recompute", get_enum(n, &c.batch.recompute, parse_recompute)),
      LB_F("optimizer.name", get_str(n, &c.optimizer.name)),
      LB_F("optimizer.lr", get_num(n, &c.schedule.peak_lr)),
      LB_F("optimizer.beta1", get_num(n, &c.optimizer.beta1)),
      LB_F("optimizer.beta2", get_num(n, &c.optimizer.beta2)),
      LB_F("optimizer.eps", get_num(n, &c.optimizer.eps)),
      LB_F("optimizer.weight_decay", get_num(n, &c.optimizer.weight_decay)),
      LB_F("optimizer.max_grad_norm", get_num(n, &c.optimizer.max_grad_norm)),
      LB_F("optimizer.trust_ratio_on_excluded", get_bool(n, &c.optimizer.trust_ratio_on_excluded)),
      LB_F("optimizer.no_decay", get_roles(n, &c.optimizer.no_decay_roles)),
      LB_F("schedule.kind", get_enum(n, &c.schedule.kind, parse_schedule_kind)),
      LB_F("schedule.total_steps", get_int(n, &c.schedule.total_steps)),
      LB_F("schedule.warmup_ratio", get_num(n, &c.schedule.warmup_ratio)),
      LB_F("schedule.constant_ratio", get_num(n, &c.schedule.constant_ratio)),
      LB_F("schedule.warmup_steps", get_int(n, &c.schedule.warmup_steps)),
      LB_F("schedule.constant_steps", get_int(n, &c.schedule.constant_steps)),
      LB_F("schedule.power", get_num(n, &c.schedule.decay_power)),
      LB_F("schedule.min_ratio", get_num(n, &c.schedule.min_ratio)),
      LB_F("schedule.first_update", get_enum(n, &c.schedule.first_update, parse_first_update)),
      LB_F("precision.dtype", get_str(n, &c.precision.dtype)),
      LB_F("precision.loss_scale", get_str(n, &c.precision.loss_scale)),
      LB_F("precision.tf32", get_bool(n, &c.precision.tf32)),
      LB_F("precision.attention", get_str(n, &c.precision.attention)),
      LB_F("precision.gemm_cast", get_str(n, &c.precision.gemm_cast)),
      LB_F("precision.activations", get_str(n, &c.precision.activations)),
      LB_F("precision.initial_scale", get_num(n, &c.precision.scaler.initial_scale)),
      LB_F("precision.growth_interval", get_int(n, &c.precision.scaler.growth_interval)),
      LB_F("precision.growth_factor", get_num(n, &c.precision.scaler.growth_factor)),
      LB_F("precision.backoff_factor", get_num(n, &c.precision.scaler.backoff_factor)),
      LB_F("precision.min_scale", get_num(n, &c.precision.scaler.min_scale)),
      LB_F("precision.hysteresis", get_int(n, &c.precision.scaler.hysteresis)),
      LB_F("precision.max_consecutive_skips", get_int(n, &c.precision.scaler.max_consecutive_skips)),
      LB_F("checkpoint.dir", get_str(n, &c.checkpoint.dir)),
      LB_F("checkpoint.every_steps", get_int(n, &c.checkpoint.every_steps)),
      LB_F("checkpoint.every_minutes", get_num(n, &c.checkpoint.every_minutes)),
      LB_F("checkpoint.keep_last", get_int(n, &c.checkpoint.keep_last)),
      LB_F("checkpoint.async", get_bool(n, &c.checkpoint.async)),
      LB_F("logging.every_steps", get_int(n, &c.logging.every_steps)),
      LB_F("logging.metrics_file", get_str(n, &c.logging.metrics_file)),
      LB_F("logging.tensorboard_dir", get_str(n, &c.logging.tensorboard_dir)),
      LB_F("logging.noise_scale", get_bool(n, &c.logging.noise_scale)),
      LB_F("logging.noise_scale_updates", get_int(n, &c.logging.noise_scale_updates)),
      LB_F("evaluation.every_steps", get_int(n, &c.evaluation.every_steps)),
      LB_F("evaluation.max_sequences", get_int(n, &c.evaluation.max_sequences)),
      LB_F("evaluation.names", get_list(n, &c.evaluation.names)),
      LB_F("distributed.bucket_mb", get_num(n, &c.distributed.bucket_mb)),
      LB_F("distributed.reduction_order", get_str(n, &c.distributed.reduction_order)),
      LB_F("distributed.shard_optimizer", get_bool(n, &c.distributed.shard_optimizer)),
      LB_F("distributed.overlap_reduction", get_bool(n, &c.distributed.overlap_reduction)),
      LB_F("distributed.grad_reduce_dtype", get_str(n, &c.distributed.grad_reduce_dtype)),
      LB_F("phase.phase_start", get_enum(n, &c.phase_start, parse_phase_start)),
      LB_F("seed", get_int(n, &c.seed)),
      LB_F("backend", get_str(n, &c.backend)),
  };
  return fields;
}
#undef LB_F

const Field* find_field(const std::string& path) {
  for (const Field& f : schema())
    if (path == f.path) return &f;
  return nullptr;
}
const std::set<std::string>& sections() {
  static const std::set<std::string> names = {"model", "data", "batch", "optimizer", "schedule",
                                              "precision", "checkpoint", "logging", "phase",
                                              "evaluation", "distributed"};
  return names;
}
bool is_section(const std::string& path) { return sections().count(path) > 0; }

// "path: unknown key", with the nearest known key or section when it looks like a typo, and
// otherwise the keys its section has (optimizer.learning_rate is no typo of optimizer.lr).
std::string unknown_key(const std::string& path) {
  std::vector<std::string> known(sections().begin(), sections().end());
  for (const Field& f : schema()) known.push_back(f.path);
  const std::string near = nearest_name(path, known);
  if (!near.empty()) return path + ": unknown key (did you mean " + near + "?)";
  // Its siblings: the keys of its section, or at the top the sections and top-level keys.
  const size_t dot = path.rfind('.');
  const std::string prefix = dot == std::string::npos ? "" : path.substr(0, dot + 1);
  std::string keys;
  auto add = [&](const std::string& k) { keys += (keys.empty() ? "" : ", ") + k; };
  if (prefix.empty())
    for (const std::string& sec : sections()) add(sec);
  for (const Field& f : schema())
    if (const std::string p = f.path; p.rfind(prefix, 0) == 0 && p.find('.', prefix.size()) == std::string::npos)
      add(p.substr(prefix.size()));
  if (keys.empty()) return path + ": unknown key";
  return path + ": unknown key (" + (prefix.empty() ? "the top level" : prefix.substr(0, dot)) + " has " + keys + ")";
}

std::string where(const std::string& name, const YAML::Mark& m) {
  if (m.is_null()) return name;
  return name + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

struct Walker {
  std::string name;
  TrainConfig* config;
  std::map<std::string, YAML::Mark> marks;

  Status walk(const YAML::Node& map, const std::string& prefix) {
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string key = it->first.Scalar();
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      const YAML::Mark mark = it->first.Mark();
      if (marks.count(path))
        return Status::invalid_argument(where(name, mark) + ": " + path + ": duplicate key");
      marks[path] = mark;
      if (const Field* f = find_field(path)) {
        Status st = f->set(it->second, *config);
        if (!st.is_ok())
          return Status::invalid_argument(where(name, it->second.Mark()) + ": " + path + ": " + st.message());
      } else if (prefix.empty() && is_section(path)) {
        if (it->second.IsNull()) continue;  // `model:` with nothing under it: an empty section
        if (!it->second.IsMap())
          return Status::invalid_argument(where(name, it->second.Mark()) + ": " + path +
                                          ": expected a mapping (a section of keys), got " +
                                          scalar_text(it->second));
        LB_RETURN_IF_ERROR(walk(it->second, path));
      } else {
        return Status::invalid_argument(where(name, mark) + ": " + unknown_key(path));
      }
    }
    return Status::ok();
  }
};

Status apply_override(const std::string& spec, TrainConfig* config, std::set<std::string>* set_keys) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    return Status::invalid_argument("--set " + spec + ": expected key.path=value");
  const std::string key = spec.substr(0, eq), value = spec.substr(eq + 1);
  const Field* f = find_field(key);
  if (!f && is_section(key))
    return Status::invalid_argument("--set " + spec + ": " + key + " is a section: set one of its keys, " + key +
                                    ".KEY=VALUE");
  if (!f) return Status::invalid_argument("--set " + spec + ": " + unknown_key(key));
  YAML::Node node;
  try {
    node = (!value.empty() && value[0] == '[') ? YAML::Load(value) : YAML::Node(value);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument("--set " + spec + ": " + key + ": " + e.msg);
  }
  Status st = f->set(node, *config);
  if (!st.is_ok()) return Status::invalid_argument("--set " + spec + ": " + key + ": " + st.message());
  set_keys->insert(key);
  return Status::ok();
}

// The config keys `message` names, in the order it names them ("model.hidden (128) must be
// divisible by model.heads (3)": both). A key counts where no identifier character follows
// it (model.hidden is not named by model.hidden_act).
std::vector<std::string> keys_named_in(const std::string& message) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::vector<std::pair<size_t, std::string>> at;
  for (const Field& f : schema()) {
    const std::string path = f.path;
    for (size_t p = message.find(path); p != std::string::npos; p = message.find(path, p + 1)) {
      const size_t end = p + path.size();
      const bool whole = (end == message.size() || !ident(message[end])) &&
                         (p == 0 || !(ident(message[p - 1]) || message[p - 1] == '.'));
      if (whole) {
        at.emplace_back(p, path);
        break;
      }
    }
  }
  std::sort(at.begin(), at.end());
  std::vector<std::string> keys;
  for (auto& [p, k] : at) keys.push_back(std::move(k));
  return keys;
}

}  // namespace

std::vector<std::string> train_config_keys() {
  std::vector<std::string> keys;
  for (const Field& f : schema()) keys.push_back(f.path);
  return keys;
}

Status parse_train_config(const std::string& text, const std::string& name,
                          const std::vector<std::string>& overrides, int world, TrainConfig* out) {
  // Every document is parsed (a syntax error in any is reported), and only one is allowed:
  // YAML::Load would read the first and drop what follows a `---` or `...` line unseen.
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    return Status::invalid_argument(where(name, e.mark) + ": YAML syntax error: " + e.msg);
  }
  // An empty one after it (a file ending in `---`, as some tools write) holds nothing to drop.
  for (size_t k = 1; k < documents.size(); ++k)
    if (!documents[k].IsNull())
      return Status::invalid_argument(where(name, documents[k].Mark()) +
                                      ": a second YAML document (after a '---' or '...' line); a config is one "
                                      "document: move its keys into the first");
  const YAML::Node root = documents.empty() ? YAML::Node() : documents[0];
  if (!root.IsMap())
    return Status::invalid_argument(name + ": expected a mapping of sections at the top level");
  TrainConfig config;
  config.source = name;
  Walker w{name, &config, {}};
  LB_RETURN_IF_ERROR(w.walk(root, ""));
  std::set<std::string> overridden;
  for (const std::string& o : overrides) LB_RETURN_IF_ERROR(apply_override(o, &config, &overridden));
  std::string key;
  Status st = config.validate(world, &key);
  if (!st.is_ok()) {
    // The key validate names, then the other keys its message names (a check across keys,
    // such as model.hidden against model.heads): the first one given by --set, else the first
    // written in the file, is where the user looks; else the key's section.
    std::string loc = name;
    std::vector<std::string> keys{key};
    for (const std::string& k : keys_named_in(st.message())) if (k != key) keys.push_back(k);
    // (global_batch from the file, micro_batch from --set: the option just typed.)
    bool found = false;
    for (const std::string& k : keys)
      if (!found && overridden.count(k)) loc = "--set " + k, found = true;
    for (const std::string& k : keys)
      if (auto it = w.marks.find(k); !found && it != w.marks.end()) loc = where(name, it->second), found = true;
    if (!found)
      if (auto sec = w.marks.find(key.substr(0, key.find('.'))); sec != w.marks.end())
        loc = where(name, sec->second) + " (in section, key not set)";
    return Status::invalid_argument(loc + ": " + st.message());
  }
  *out = std::move(config);
  return Status::ok();
}

Status load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                         int world, TrainConfig* out) {
  std::string text;
  Status st = read_file(path, &text);
  if (!st.is_ok()) return Status::not_found("config " + path + ": " + st.message());
  return parse_train_config(text, path, overrides, world, out);
}

}  // namespace lansbert
