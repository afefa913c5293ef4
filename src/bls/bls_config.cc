#include "bls/bls_config.h"

#include <filesystem>

#include "config/model_config_loader.h"
#include "config/parameters.h"
#include "config/unknown_parameters.h"

namespace inflight::bls {
namespace {

namespace fs = std::filesystem;

Status ForModel(const std::string& model, const Status& st) {
  return Status(st.code(), "model '" + model + "': " + st.message());
}

// A sibling model's configuration (<repository>/<name>/config.pbtxt), when there is one.
Result<inference::ModelConfig> SiblingConfig(const std::string& repository_path,
                                             const std::string& name) {
  const fs::path path = fs::path(repository_path).parent_path() / name / "config.pbtxt";
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return NotFound("there is no " + path.string());
  }
  return config::LoadModelConfigFile(path.string());
}

}  // namespace

Result<BlsConfig> LoadBlsConfig(const inference::ModelConfig& config,
                                const std::string& repository_path) {
  BlsConfig out;
  out.model_name = config.name();
  const std::string& model = out.model_name;
  out.batched = config.max_batch_size() > 0;
  out.decoupled = config.model_transaction_policy().decoupled();
  for (const auto& o : config.output()) out.outputs.push_back(o.name());
  // The keys of NVIDIA's tensorrt_llm_bls template, and ours: tokenizer_dir, add_special_tokens
  // and skip_special_tokens (read here when the tokenizer is not the preprocessing model's).
  config::WarnUnknownParameters(
      config,
      {"accumulate_tokens", "tensorrt_llm_model_name", "tensorrt_llm_draft_model_name",
       "multimodal_encoders_name", "tokenizer_dir", "add_special_tokens", "skip_special_tokens"});

  auto accumulate = config::GetBoolParameter(config, "accumulate_tokens");
  if (!accumulate.ok()) return ForModel(model, accumulate.status());
  out.accumulate_tokens = accumulate->value_or(false);
  if (auto name = config::GetParameter(config, "tensorrt_llm_model_name", "tensorrt_llm")) {
    out.llm_model_name = *name;
  }
  if (auto draft = config::GetParameter(config, "tensorrt_llm_draft_model_name")) {
    return Unsupported("model '" + model + "': tensorrt_llm_draft_model_name \"" + *draft +
                       "\" asks for speculative decoding with a draft model, which the C++ "
                       "tensorrt_llm_bls model does not do yet; leave the parameter empty");
  }
  if (auto encoders = config::GetParameter(config, "multimodal_encoders_name")) {
    return Unsupported("model '" + model + "': multimodal_encoders_name \"" + *encoders +
                       "\" asks for multimodal inputs, which are not served; leave it empty");
  }

  std::optional<inference::ModelConfig> preprocessing;
  if (auto dir = config::GetParameter(config, "tokenizer_dir")) {
    out.tokenizer_dir = *dir;
  } else {
    auto sibling = SiblingConfig(repository_path, "preprocessing");
    if (!sibling.ok()) {
      return InvalidArgument("model '" + model +
                             "': no tokenizer: its tokenizer_dir parameter is unset and the "
                             "preprocessing model's configuration cannot be read (" +
                             sibling.status().message() +
                             "); set tokenizer_dir to the folder holding tokenizer.json or "
                             "vocab.json + merges.txt");
    }
    auto sibling_dir = config::GetParameter(*sibling, "tokenizer_dir");
    if (!sibling_dir) {
      return InvalidArgument("model '" + model +
                             "': no tokenizer: neither this model nor the preprocessing model "
                             "beside it sets tokenizer_dir");
    }
    out.tokenizer_dir = *sibling_dir;
    preprocessing = std::move(*sibling);
  }
  const inference::ModelConfig& pre = preprocessing ? *preprocessing : config;
  auto add = config::GetBoolParameter(pre, "add_special_tokens");
  if (!add.ok()) return ForModel(model, add.status());
  out.add_special_tokens = add->value_or(true);
  auto skip = config::GetBoolParameter(config, "skip_special_tokens");
  if (!skip.ok()) return ForModel(model, skip.status());
  if (skip->has_value()) {
    out.skip_special_tokens = **skip;
  } else if (auto post = SiblingConfig(repository_path, "postprocessing"); post.ok()) {
    auto post_skip = config::GetBoolParameter(*post, "skip_special_tokens");
    if (!post_skip.ok()) return ForModel(model, post_skip.status());
    out.skip_special_tokens = post_skip->value_or(true);
  }
  return out;
}

}  // namespace inflight::bls
