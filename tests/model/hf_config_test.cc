// Hugging Face config.json: what export writes reads back as the same model; a real-world
// config (Google's bert-base-uncased as transformers publishes it) reads as bert-base; absent
// sizes take transformers' defaults; each bad field is an error naming the file and the field.
#include <gtest/gtest.h>

#include "lansbert/model/hf_config.h"

namespace lansbert {
namespace {

void expect_same(const BertConfig& a, const BertConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.intermediate, b.intermediate);
  EXPECT_EQ(a.max_positions, b.max_positions);
  EXPECT_EQ(a.type_vocab, b.type_vocab);
  EXPECT_EQ(a.layernorm_eps, b.layernorm_eps);
  EXPECT_EQ(a.hidden_dropout, b.hidden_dropout);
  EXPECT_EQ(a.attention_dropout, b.attention_dropout);
  EXPECT_EQ(a.init_std, b.init_std);
  EXPECT_EQ(a.hidden_act, b.hidden_act);
}

TEST(HfConfig, WhatExportWritesReadsBackAsTheSameModel) {
  BertConfig c;
  c.vocab_size = 72;
  c.hidden = 96;
  c.layers = 3;
  c.heads = 6;
  c.intermediate = 200;
  c.max_positions = 40;
  c.type_vocab = 3;
  c.layernorm_eps = 1e-5f;
  c.hidden_dropout = 0.05f;
  c.attention_dropout = 0.15f;
  c.init_std = 0.2f;
  for (kern::GeluForm act : {kern::GeluForm::kErf, kern::GeluForm::kTanh}) {
    c.hidden_act = act;
    BertConfig back;
    ASSERT_TRUE(parse_hf_config(hf_config_json(c, "float32"), "x/config.json", &back).is_ok());
    expect_same(back, c);
  }
}

TEST(HfConfig, GooglesBertBaseUncasedReadsAsBertBase) {
  // The fields of bert-base-uncased's config.json on the Hugging Face hub.
  const char* text = R"({
    "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": false, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
    "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0,
    "position_embedding_type": "absolute", "transformers_version": "4.6.0.dev0",
    "type_vocab_size": 2, "use_cache": true, "vocab_size": 30522})";
  BertConfig got, base;
  ASSERT_TRUE(parse_hf_config(text, "b/config.json", &got).is_ok());
  ASSERT_TRUE(bert_preset("bert-base", &base).is_ok());
  expect_same(got, base);
}

TEST(HfConfig, AbsentFieldsTakeTransformersDefaults) {
  BertConfig got;
  ASSERT_TRUE(parse_hf_config(R"({"num_hidden_layers": 2, "hidden_act": "gelu_pytorch_tanh"})", "p", &got).is_ok());
  EXPECT_EQ(got.layers, 2);
  EXPECT_EQ(got.hidden, 768);
  EXPECT_EQ(got.heads, 12);
  EXPECT_EQ(got.vocab_size, 30522);
  EXPECT_EQ(got.max_positions, 512);
  EXPECT_EQ(got.layernorm_eps, 1e-12f);
  EXPECT_EQ(got.hidden_act, kern::GeluForm::kTanh);
  ASSERT_TRUE(parse_hf_config(R"({"hidden_act": "gelu_fast"})", "p", &got).is_ok());
  EXPECT_EQ(got.hidden_act, kern::GeluForm::kTanh);
  ASSERT_TRUE(parse_hf_config(R"({"hidden_act": "gelu_python"})", "p", &got).is_ok());
  EXPECT_EQ(got.hidden_act, kern::GeluForm::kErf);
}

TEST(HfConfig, EachBadFieldIsNamed) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"[1, 2]", "d/config.json: not a JSON object"},
      {"{\"hidden_size\": 7", "d/config.json: not JSON (at byte offset 17)"},
      {"{\"hidden_size\" 7}", "d/config.json: not JSON (at byte offset 15)"},
      {R"({"hidden_size": "768"})", "field 'hidden_size': expected an integer in [1, 65536], got \"768\""},
      {R"({"num_hidden_layers": 0})", "field 'num_hidden_layers': expected an integer in [1, 4096], got 0"},
      {R"({"num_hidden_layers": 10000000})", "field 'num_hidden_layers': expected an integer in [1, 4096]"},
      {R"({"vocab_size": 2.5})", "field 'vocab_size': expected an integer in [1, 16777216], got 2.5"},
      {R"({"intermediate_size": 4294967296})", "field 'intermediate_size': expected an integer in [1, 1048576]"},
      {R"({"layer_norm_eps": 1e-300})", "field 'layer_norm_eps': expected a number in (0, 1), got 1e-300"},
      {R"({"tie_word_embeddings": false})", "field 'tie_word_embeddings': expected true"},
      {R"({"num_attention_heads": 5})", "field 'num_attention_heads': 5 heads do not divide hidden_size 768"},
      {R"({"layer_norm_eps": 0})", "field 'layer_norm_eps': expected a number in (0, 1), got 0"},
      {R"({"hidden_dropout_prob": 1})", "field 'hidden_dropout_prob': expected a number in [0, 1), got 1"},
      {R"({"attention_probs_dropout_prob": null})", "field 'attention_probs_dropout_prob': expected a number"},
      {R"({"hidden_act": "relu"})", "field 'hidden_act': 'relu': lansbert computes GELU"},
      {R"({"hidden_act": 3})", "field 'hidden_act': expected a string, got 3"},
      {R"({"model_type": "roberta"})", "field 'model_type': 'roberta' is not BERT"},
      {R"({"position_embedding_type": "relative_key"})", "field 'position_embedding_type': 'relative_key'"},
  };
  for (const auto& c : cases) {
    BertConfig got;
    got.layers = 99;
    const Status st = parse_hf_config(c.text, "d/config.json", &got);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << c.text << " -> " << st.message();
    EXPECT_EQ(st.message().rfind("d/config.json: ", 0), 0u) << st.message();
    EXPECT_EQ(got.layers, 99) << "a refused config left its output changed: " << c.text;
  }
}

TEST(HfConfig, AMissingFileIsNotFound) {
  BertConfig got;
  const Status st = read_hf_config("/nonexistent-lansbert-dir/config.json", &got);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.to_string();
  EXPECT_NE(st.message().find("/nonexistent-lansbert-dir/config.json"), std::string::npos);
}

}  // namespace
}  // namespace lansbert
