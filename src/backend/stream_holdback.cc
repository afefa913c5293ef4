#include "backend/stream_holdback.h"

#include <filesystem>

#include "common/logging.h"
#include "config/model_config_loader.h"
#include "config/parameters.h"

namespace inflight::backend {
namespace {

// `held` + `fresh`, then the first `keep` items go out through `fresh` and the rest stay in `held`.
template <typename T>
void Split(std::vector<T>& held, std::vector<T>& fresh, std::size_t keep) {
  held.insert(held.end(), fresh.begin(), fresh.end());
  fresh.assign(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(keep));
  held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(keep));
}

}  // namespace

Result<std::unique_ptr<tokenizer::Tokenizer>> LoadStreamTokenizer(
    const config::LlmParams& params, const std::string& repository_path) {
  namespace fs = std::filesystem;
  std::string dir = params.tokenizer_dir;
  std::string source = "its tokenizer_dir";
  if (dir.empty()) {
    const fs::path sibling =
        fs::path(repository_path).parent_path() / "postprocessing" / "config.pbtxt";
    std::error_code ec;
    if (fs::exists(sibling, ec)) {
      auto config = config::LoadModelConfigFile(sibling.string());
      if (config.ok()) {
        if (auto value = config::GetParameter(*config, "tokenizer_dir")) dir = *value;
      }
      source = "the tokenizer_dir of " + sibling.string();
    }
  }
  if (dir.empty()) {
    LOG_INFO(
        "model '{}': no tokenizer_dir (neither its own nor a postprocessing model's beside it): "
        "streamed output_ids are sent as they come, and may end inside a character",
        params.model_name);
    return std::unique_ptr<tokenizer::Tokenizer>();
  }
  auto tokenizer = tokenizer::Tokenizer::Load(dir);
  if (!tokenizer.ok() && params.tokenizer_dir.empty()) {
    // The postprocessing model's own load reports its tokenizer; this model still serves.
    LOG_WARN(
        "model '{}': cannot load the tokenizer of {} \"{}\" ({}): streamed output_ids are sent as "
        "they come, and may end inside a character",
        params.model_name, source, dir, tokenizer.status().message());
    return std::unique_ptr<tokenizer::Tokenizer>();
  }
  if (!tokenizer.ok()) {
    return Status(tokenizer.status().code(),
                  "model '" + params.model_name + "': cannot load the tokenizer of " + source +
                      " \"" + dir + "\": " + tokenizer.status().message());
  }
  LOG_INFO("model '{}': streamed output_ids end on whole characters of the tokenizer in {} ({})",
           params.model_name, dir, source);
  return std::move(tokenizer).value();
}

bool StreamHoldback::Apply(ResponseResult& result) {
  if (result.output_token_ids.size() != 1) return true;
  std::vector<std::int32_t>& ids = result.output_token_ids[0];
  const std::size_t fresh = ids.size();
  const std::size_t keep = result.is_final ? held_ids_.size() + fresh : boundary_.Push(ids);
  Split(held_ids_, ids, keep);
  if (result.log_probs.size() == 1 && result.log_probs[0].size() == fresh) {
    Split(held_log_probs_, result.log_probs[0], keep);
  }
  const std::size_t vocab = static_cast<std::size_t>(result.vocab_size);
  if (vocab > 0 && result.generation_logits.size() == fresh * vocab) {
    Split(held_generation_logits_, result.generation_logits, keep * vocab);
  }
  return result.is_final || keep > 0;
}

}  // namespace inflight::backend
