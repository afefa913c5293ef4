#include "bls/bls_inputs.h"

#include <algorithm>
#include <map>
#include <utility>

#include "tokenizer/text_models.h"

namespace inflight::bls {
namespace {

using tokenizer::HostTensor;

// BLS input -> tensorrt_llm input, for what is handed on unchanged (NVIDIA's triton_decoder.py).
const std::map<std::string, std::string>& ForwardedNames() {
  static const std::map<std::string, std::string> kNames = {
      {"beam_width", "beam_width"},
      {"top_k", "runtime_top_k"},
      {"top_p", "runtime_top_p"},
      {"temperature", "temperature"},
      {"length_penalty", "len_penalty"},
      {"repetition_penalty", "repetition_penalty"},
      {"min_tokens", "min_tokens"},
      {"presence_penalty", "presence_penalty"},
      {"frequency_penalty", "frequency_penalty"},
      {"seed", "seed"},
      {"return_log_probs", "return_log_probs"},
      {"return_context_logits", "return_context_logits"},
      {"return_generation_logits", "return_generation_logits"},
      {"return_perf_metrics", "return_perf_metrics"},
      {"num_return_sequences", "num_return_sequences"},
      {"exclude_input_in_output", "exclude_input_in_output"},
      {"stream", "streaming"},
      {"prompt_embedding_table", "prompt_embedding_table"},
      {"prompt_vocab_size", "prompt_vocab_size"},
      {"prompt_table_extra_id", "prompt_table_extra_ids"},
      {"lora_task_id", "lora_task_id"},
      {"lora_weights", "lora_weights"},
      {"lora_config", "lora_config"},
      {"guided_decoding_guide_type", "guided_decoding_guide_type"},
      {"guided_decoding_guide", "guided_decoding_guide"},
  };
  return kNames;
}

// Inputs the BLS model reads itself, by NVIDIA's preprocessing name where it has one.
const std::map<std::string, std::string>& PreprocessNames() {
  static const std::map<std::string, std::string> kNames = {
      {"bad_words", "BAD_WORDS_DICT"},
      {"stop_words", "STOP_WORDS_DICT"},
      {"embedding_bias_words", "EMBEDDING_BIAS_WORDS"},
      {"embedding_bias_weights", "EMBEDDING_BIAS_WEIGHTS"},
      {"end_id", "END_ID"},
      {"pad_id", "PAD_ID"},
  };
  return kNames;
}

HostTensor Strings(std::string name, std::vector<std::string> values) {
  HostTensor t;
  t.name = std::move(name);
  t.type = HostTensor::Type::kString;
  t.shape = {1, static_cast<int64_t>(values.size())};
  t.str = std::move(values);
  return t;
}

HostTensor Int32s(std::string name, std::vector<int32_t> values) {
  HostTensor t;
  t.name = std::move(name);
  t.type = HostTensor::Type::kInt32;
  t.shape = {1, static_cast<int64_t>(values.size())};
  t.i32 = std::move(values);
  return t;
}

// A row's tensor in the preprocessing model's host form.
Result<HostTensor> ToHost(const RawTensor& t, const std::string& name) {
  if (t.datatype == TRITONSERVER_TYPE_BYTES) {
    ASSIGN_OR_RETURN(auto elements, BytesElements(t));
    return Strings(name, std::move(elements));
  }
  if (t.datatype == TRITONSERVER_TYPE_INT32) {
    std::vector<int32_t> values(t.data.size() / 4);
    std::memcpy(values.data(), t.data.data(), values.size() * 4);
    return Int32s(name, std::move(values));
  }
  if (t.datatype == TRITONSERVER_TYPE_FP32) {
    HostTensor h;
    h.name = name;
    h.type = HostTensor::Type::kFp32;
    h.f32.resize(t.data.size() / 4);
    std::memcpy(h.f32.data(), t.data.data(), h.f32.size() * 4);
    h.shape = {1, static_cast<int64_t>(h.f32.size())};
    return h;
  }
  return InvalidArgument("input '" + t.name + "' has data type " + DataTypeName(t.datatype) +
                         "; accepted: BYTES, INT32 or FP32 as the model configuration declares");
}

RawTensor FromHost(const HostTensor& h, const std::string& name) {
  switch (h.type) {
    case HostTensor::Type::kInt32:
      return MakeTensor(name, TRITONSERVER_TYPE_INT32, h.shape, h.i32);
    case HostTensor::Type::kFp32:
      return MakeTensor(name, TRITONSERVER_TYPE_FP32, h.shape, h.f32);
    case HostTensor::Type::kString:
      break;
  }
  return MakeBytesTensor(name, h.shape, h.str);
}

}  // namespace

Result<std::vector<RowRequest>> BuildRows(std::vector<RawTensor> inputs, const BlsConfig& config) {
  if (!config.batched) {
    for (RawTensor& t : inputs) t.shape.insert(t.shape.begin(), 1);
  }
  std::map<std::string, const RawTensor*> by_name;
  for (const RawTensor& t : inputs) by_name[t.name] = &t;
  auto find = [&](const std::string& name) -> const RawTensor* {
    auto it = by_name.find(name);
    return it == by_name.end() || it->second->NumElements() == 0 ? nullptr : it->second;
  };

  const RawTensor* text = find("text_input");
  if (text == nullptr) return InvalidArgument("text_input is required");
  const int64_t batch = text->shape[0];
  if (const RawTensor* draft = find("num_draft_tokens")) {
    ASSIGN_OR_RETURN(int32_t n, FirstValue<int32_t>(*draft));
    if (n > 0) {
      return Unsupported("num_draft_tokens " + std::to_string(n) +
                         " asks for speculative decoding with a draft model, which the C++ "
                         "tensorrt_llm_bls model does not do yet (send 0 or leave it out)");
    }
  }
  if (find("decoder_text_input") != nullptr) {
    return Unsupported("decoder_text_input is not accepted: encoder-decoder models are not served");
  }
  if (batch > 1 && !config.decoupled) {
    return InvalidArgument("text_input holds " + std::to_string(batch) +
                           " rows; a tensorrt_llm_bls model that is not decoupled answers one "
                           "row per request (send rows as separate requests, or set "
                           "decoupled_mode: true)");
  }

  std::vector<RowRequest> rows;
  for (int64_t r = 0; r < batch; ++r) {
    RowRequest row;
    row.row = r;
    for (const RawTensor& t : inputs) {
      if (t.NumElements() == 0 || t.name == "num_draft_tokens" || t.name == "use_draft_logits") {
        continue;
      }
      ASSIGN_OR_RETURN(RawTensor mine, SliceRow(t, r, batch));
      if (t.name == "text_input") {
        ASSIGN_OR_RETURN(auto texts, BytesElements(mine));
        if (texts.empty()) return InvalidArgument("text_input is required");
        row.text = texts[0];
      } else if (t.name == "max_tokens") {
        ASSIGN_OR_RETURN(row.max_tokens, FirstValue<int32_t>(mine));
      } else if (auto pre = PreprocessNames().find(t.name); pre != PreprocessNames().end()) {
        ASSIGN_OR_RETURN(HostTensor host, ToHost(mine, pre->second));
        row.preprocess_inputs.push_back(std::move(host));
      } else if (auto fwd = ForwardedNames().find(t.name); fwd != ForwardedNames().end()) {
        if (t.name == "stream") {
          ASSIGN_OR_RETURN(row.stream, FirstValue<bool>(mine));
        } else if (t.name == "beam_width") {
          ASSIGN_OR_RETURN(row.beam_width, FirstValue<int32_t>(mine));
        }
        mine.name = fwd->second;
        row.forwarded.push_back(std::move(mine));
      } else {
        return InvalidArgument("input '" + t.name + "' is not an input of tensorrt_llm_bls");
      }
    }
    if (row.max_tokens <= 0) {
      return InvalidArgument("max_tokens must be a single value > 0, got " +
                             (find("max_tokens") ? std::to_string(row.max_tokens) : "none"));
    }
    if (row.stream && !config.decoupled) {
      return InvalidArgument(
          "stream true needs a decoupled model: fill tensorrt_llm_bls with "
          "decoupled_mode:true, or send stream false");
    }
    if (row.stream && row.beam_width > 1) {
      return Unsupported("stream true with beam_width " + std::to_string(row.beam_width) +
                         " is not supported: streaming is for beam_width 1");
    }
    row.preprocess_inputs.push_back(Strings("QUERY", {row.text}));
    row.preprocess_inputs.push_back(Int32s("REQUEST_OUTPUT_LEN", {row.max_tokens}));
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<std::vector<RawTensor>> LlmInputs(const tokenizer::Tokenizer& tokenizer,
                                         bool add_special_tokens, const RowRequest& row) {
  // preprocessing output -> tensorrt_llm input, as NVIDIA's BLS wires them.
  static const std::pair<const char*, const char*> kOutputs[] = {
      {"INPUT_ID", "input_ids"},
      {"REQUEST_INPUT_LEN", "input_lengths"},
      {"BAD_WORDS_IDS", "bad_words_list"},
      {"STOP_WORDS_IDS", "stop_words_list"},
      {"EMBEDDING_BIAS", "embedding_bias"},
      {"OUT_END_ID", "end_id"},
      {"OUT_PAD_ID", "pad_id"},
  };
  std::vector<std::string> requested;
  for (const auto& [from, to] : kOutputs) requested.emplace_back(from);
  ASSIGN_OR_RETURN(std::vector<HostTensor> pre,
                   tokenizer::Preprocess(tokenizer, {add_special_tokens, /*batched=*/true},
                                         row.preprocess_inputs, requested));
  std::vector<RawTensor> out = row.forwarded;
  for (const HostTensor& h : pre) {
    if (h.num_elements() == 0) continue;  // no words, no bias: the input is left out
    const auto* name = std::find_if(std::begin(kOutputs), std::end(kOutputs),
                                    [&](const auto& p) { return h.name == p.first; });
    RawTensor t = FromHost(h, name->second);
    if (t.name == "input_lengths" || t.name == "end_id" || t.name == "pad_id") {
      t.shape = {1, 1};
    }
    out.push_back(std::move(t));
  }
  out.push_back(
      MakeTensor<int32_t>("request_output_len", TRITONSERVER_TYPE_INT32, {1, 1}, {row.max_tokens}));
  return out;
}

}  // namespace inflight::bls
