#include "tokenizer/backend/model_state.h"

#include "common/logging.h"
#include "config/model_config_loader.h"
#include "config/parameters.h"
#include "config/unknown_parameters.h"
#include "tokenizer/text_models.h"

namespace inflight::tokenizer::backend {
namespace {

Status ForModel(const std::string& model, const Status& st) {
  return Status(st.code(), "model '" + model + "': " + st.message());
}

// Parameter value with a default; a set but malformed value is an error, not the default.
Result<bool> BoolParameter(const inference::ModelConfig& config, const std::string& model,
                           const std::string& key, bool fallback) {
  auto value = config::GetBoolParameter(config, key);
  if (!value.ok()) return ForModel(model, value.status());
  return value->value_or(fallback);
}

// The keys of our preprocessing and postprocessing templates. tokenizer_type is NVIDIA's up to
// v0.8 and ignored here (the tokenizer files say what they are). NVIDIA's multimodal keys are
// unknown on purpose: they are not served (docs/template_keys.md), so setting one gets the warning.
std::vector<std::string> KnownParameters(TextModelRole role) {
  if (role == TextModelRole::kPreprocessing) {
    return {"tokenizer_dir", "tokenizer_type", "add_special_tokens"};
  }
  return {"tokenizer_dir", "tokenizer_type", "skip_special_tokens"};
}

}  // namespace

Result<std::vector<HostTensor>> TextModelState::Run(const std::vector<HostTensor>& inputs,
                                                    std::vector<std::string> requested) const {
  if (role == TextModelRole::kPreprocessing) {
    if (requested.empty()) requested = PreprocessOutputNames();
    return Preprocess(*tokenizer, {add_special_tokens, batched}, inputs, requested);
  }
  if (requested.empty()) requested = {"OUTPUT"};
  return Postprocess(*tokenizer, {skip_special_tokens, batched}, inputs, requested);
}

Result<std::unique_ptr<TextModelState>> CreateTextModelState(const std::string& model_name,
                                                             std::string_view config_json) {
  auto parsed = config::ParseModelConfigJson(config_json);
  if (!parsed.ok()) return ForModel(model_name, parsed.status());
  const inference::ModelConfig& config = *parsed;

  auto state = std::make_unique<TextModelState>();
  state->name = model_name;
  state->batched = config.max_batch_size() > 0;
  bool has_query = false, has_tokens = false;
  for (const auto& input : config.input()) {
    has_query |= input.name() == "QUERY";
    has_tokens |= input.name() == "TOKENS_BATCH";
  }
  if (has_query == has_tokens) {
    return InvalidArgument("model '" + model_name + "': " +
                           (has_query ? "has both inputs QUERY and TOKENS_BATCH"
                                      : "has neither input QUERY nor TOKENS_BATCH") +
                           "; a tokenizer model is either preprocessing (input QUERY) or "
                           "postprocessing (input TOKENS_BATCH)");
  }
  state->role = has_query ? TextModelRole::kPreprocessing : TextModelRole::kPostprocessing;
  config::WarnUnknownParameters(config, KnownParameters(state->role));

  auto dir = config::GetParameter(config, "tokenizer_dir");
  if (!dir) {
    return InvalidArgument("model '" + model_name +
                           "': parameter tokenizer_dir is not set (absent, empty or an unfilled "
                           "${tokenizer_dir}); set it to the folder holding tokenizer.json or "
                           "vocab.json + merges.txt");
  }
  state->tokenizer_dir = *dir;
  ASSIGN_OR_RETURN(state->add_special_tokens,
                   BoolParameter(config, model_name, "add_special_tokens", true));
  ASSIGN_OR_RETURN(state->skip_special_tokens,
                   BoolParameter(config, model_name, "skip_special_tokens", true));

  auto tokenizer = Tokenizer::Load(*dir);
  if (!tokenizer.ok()) {
    return Status(tokenizer.status().code(),
                  "model '" + model_name + "': cannot load the tokenizer of tokenizer_dir \"" +
                      *dir + "\": " + tokenizer.status().message());
  }
  state->tokenizer = std::move(tokenizer).value();
  LOG_INFO("model '{}': {} with the tokenizer of {} ({} tokens)", model_name,
           has_query ? "preprocessing" : "postprocessing", *dir, state->tokenizer->vocab_size());
  return state;
}

}  // namespace inflight::tokenizer::backend
