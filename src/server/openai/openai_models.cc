#include "server/openai/openai_models.h"

#include <nlohmann/json.hpp>

#include "server/openai/engine_max_seq_len.h"

namespace inflight::server::openai {
namespace {

using nlohmann::json;

bool HasTensor(const std::vector<TensorMetadata>& tensors, const std::string& name) {
  for (const TensorMetadata& t : tensors) {
    if (t.name == name) return true;
  }
  return false;
}

// A string parameter of a model config (Triton's JSON: "parameters": {"k": {"string_value": v}}),
// skipping unfilled template values ("${tokenizer_dir}").
std::optional<std::string> StringParameter(const json& config, const std::string& key) {
  const json* value = nullptr;
  if (config.contains("parameters") && config["parameters"].contains(key)) {
    value = &config["parameters"][key];
  }
  if (value == nullptr || !value->contains("string_value")) return std::nullopt;
  std::string text = (*value)["string_value"].get<std::string>();
  if (text.empty() || text.rfind("${", 0) == 0) return std::nullopt;
  return text;
}

Result<json> ConfigOf(const Server& server, const std::string& name) {
  ASSIGN_OR_RETURN(std::string text, server.GetModelConfigJson(name, -1));
  json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return Internal("model \"" + name + "\": config is not JSON");
  return config;
}

// The configs of the model and of its ensemble steps, the model first.
std::vector<json> ConfigsOf(const Server& server, const json& config) {
  std::vector<json> configs = {config};
  if (!config.contains("ensemble_scheduling")) return configs;
  for (const json& step : config["ensemble_scheduling"].value("step", json::array())) {
    auto step_config = ConfigOf(server, step.value("model_name", ""));
    if (step_config.ok()) configs.push_back(std::move(*step_config));
  }
  return configs;
}

}  // namespace

Result<OpenAiModels::TokenizerFiles> OpenAiModels::LoadTokenizer(const std::string& dir) {
  {
    std::lock_guard lock(mu_);
    auto it = tokenizers_.find(dir);
    if (it != tokenizers_.end()) return it->second;
  }
  // Loaded outside the lock: a large tokenizer.json takes a while; a second load of the same
  // folder by a concurrent first request is wasted work, not an error.
  ASSIGN_OR_RETURN(auto tokenizer, tokenizer::Tokenizer::Load(dir));
  ASSIGN_OR_RETURN(ChatTemplateSet chat, LoadChatTemplates(dir));
  TokenizerFiles files{std::shared_ptr<const tokenizer::Tokenizer>(std::move(tokenizer)),
                       std::make_shared<const ChatTemplateSet>(std::move(chat))};
  std::lock_guard lock(mu_);
  return tokenizers_.emplace(dir, std::move(files)).first->second;
}

Result<std::shared_ptr<const OpenAiModel>> OpenAiModels::Resolve(const std::string& name) {
  const std::string not_served = "model \"" + name + "\" is not served by the OpenAI routes: ";
  if (!server_.ModelIsReady(name, -1)) {
    return NotFound("model \"" + name +
                    "\" does not exist or is not ready; GET /v1/models lists "
                    "the models served");
  }
  ASSIGN_OR_RETURN(ModelMetadata metadata, server_.GetModelMetadata(name, -1));
  if (!HasTensor(metadata.inputs, "text_input") || !HasTensor(metadata.inputs, "max_tokens") ||
      !HasTensor(metadata.outputs, "text_output")) {
    return NotFound(not_served +
                    "it lacks the ensemble's text_input/max_tokens inputs or text_output output");
  }
  ASSIGN_OR_RETURN(json config, ConfigOf(server_, name));
  auto model = std::make_shared<OpenAiModel>();
  model->name = name;
  model->batching = config.value("max_batch_size", 0) > 0;
  for (const json& part : ConfigsOf(server_, config)) {
    if (auto dir = StringParameter(part, "tokenizer_dir"); dir && model->tokenizer_dir.empty()) {
      model->tokenizer_dir = *dir;
      if (auto add = StringParameter(part, "add_special_tokens")) {
        model->add_special_tokens = !(*add == "false" || *add == "False" || *add == "0");
      }
    }
    for (const char* key : {"engine_dir", "gpt_model_path"}) {
      if (auto dir = StringParameter(part, key); dir && !model->max_seq_len) {
        model->max_seq_len = EngineMaxSeqLen(*dir, part);
      }
    }
  }
  if (model->tokenizer_dir.empty()) {
    return NotFound(not_served + "no tokenizer_dir parameter on it or its ensemble steps");
  }
  auto files = LoadTokenizer(model->tokenizer_dir);
  if (!files.ok()) {
    return Status(files.status().code(), "model \"" + name + "\": tokenizer_dir " +
                                             model->tokenizer_dir + ": " +
                                             files.status().message());
  }
  model->tokenizer = files->tokenizer;
  model->chat = files->chat;
  return std::shared_ptr<const OpenAiModel>(std::move(model));
}

std::vector<std::string> OpenAiModels::List() {
  std::vector<std::string> names;
  for (const ModelIndexEntry& entry : server_.ModelIndex()) {
    if (entry.state != "READY") continue;
    if (Resolve(entry.name).ok()) names.push_back(entry.name);
  }
  return names;
}

}  // namespace inflight::server::openai
