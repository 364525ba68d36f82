// Hugging Face's config.json for BERT: the text `lansbert export` writes, and the sizes read
// back from one (a directory that transformers' save_pretrained wrote, Google's converted
// checkpoints, an export of ours) for `lansbert eval` and `lansbert train --init-from`.
#pragma once

#include <string>

#include "lansbert/core/status.h"
#include "lansbert/model/bert_config.h"

namespace lansbert {

// config.json of BertForPreTraining for `c`, with its torch_dtype ("float32", "bfloat16",
// "float16"); pretty-printed, newline-terminated.
std::string hf_config_json(const BertConfig& c, const char* torch_dtype);

// The BertConfig of config.json text. A size that is absent takes transformers' BertConfig
// default (vocab 30522, hidden 768, 12 layers, 12 heads, intermediate 3072, 512 positions,
// 2 token types, layer_norm_eps 1e-12, GELU erf), as from_pretrained does. Refused, naming
// `path` and the field: text that is not a JSON object; a field of the wrong type or out of
// range; a model_type other than "bert"; a position_embedding_type other than "absolute"; a
// hidden_act other than "gelu" (erf) or one of transformers' tanh forms ("gelu_new",
// "gelu_pytorch_tanh", "gelu_fast"); tie_word_embeddings other than true (lansbert's MLM
// decoder is the word embeddings); heads that do not divide hidden_size. Sizes are bounded
// far above any BERT (2^12 layers, hidden 2^16, ...). invalid_argument.
Status parse_hf_config(const std::string& text, const std::string& path, BertConfig* out);
// parse_hf_config of the file `path` (not_found / io_error when it cannot be read).
Status read_hf_config(const std::string& path, BertConfig* out);

// For a message about `dir` lacking model.safetensors: when it holds transformers' older
// pytorch_model.bin (a pickle lansbert does not read), a sentence saying how to convert it;
// else "".
std::string pytorch_weights_hint(const std::string& dir);

}  // namespace lansbert
