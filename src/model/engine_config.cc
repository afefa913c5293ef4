#include "model/engine_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace inflight::model {
namespace {

namespace fs = std::filesystem;

struct ArchitectureEntry {
  Architecture architecture;
  const char* name;
};
constexpr ArchitectureEntry kArchitectures[] = {{Architecture::kLlama, "LlamaForCausalLM"},
                                                {Architecture::kMistral, "MistralForCausalLM"},
                                                {Architecture::kQwen2, "Qwen2ForCausalLM"},
                                                {Architecture::kQwen3, "Qwen3ForCausalLM"},
                                                {Architecture::kGpt2, "GPT2LMHeadModel"}};

Status CheckPositive(const char* name, std::int64_t v) {
  if (v <= 0) {
    return InvalidArgument(std::string("engine config \"") + name + "\" is " + std::to_string(v) +
                           ", must be > 0");
  }
  return Status::Ok();
}

}  // namespace

const char* SupportedArchitectures() {
  return "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
         "GPT2LMHeadModel";
}

std::optional<Architecture> ParseArchitecture(std::string_view name) {
  for (const ArchitectureEntry& e : kArchitectures) {
    if (name == e.name) return e.architecture;
  }
  return std::nullopt;
}

void CanonicalizeAttentionWindows(EngineConfig* c) {
  bool any = false;
  for (std::int64_t& w : c->attention_windows) {
    if (w >= c->build.max_seq_len) w = 0;
    any = any || w != 0;
  }
  if (!any) c->attention_windows.clear();
}

Status EngineConfig::Validate() const {
  RETURN_IF_ERROR(CheckPositive("vocab_size", vocab_size));
  RETURN_IF_ERROR(CheckPositive("hidden_size", hidden_size));
  RETURN_IF_ERROR(CheckPositive("num_layers", num_layers));
  RETURN_IF_ERROR(CheckPositive("num_attention_heads", num_attention_heads));
  RETURN_IF_ERROR(CheckPositive("num_kv_heads", num_kv_heads));
  RETURN_IF_ERROR(CheckPositive("head_dim", head_dim));
  RETURN_IF_ERROR(CheckPositive("intermediate_size", intermediate_size));
  RETURN_IF_ERROR(CheckPositive("max_position_embeddings", max_position_embeddings));
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return InvalidArgument(std::string("engine config \"dtype\" is ") + DTypeName(dtype) +
                           ", must be one of: float32, float16, bfloat16");
  }
  if (num_attention_heads % num_kv_heads != 0) {
    return InvalidArgument("num_attention_heads " + std::to_string(num_attention_heads) +
                           " is not a multiple of num_kv_heads " + std::to_string(num_kv_heads));
  }
  RETURN_IF_ERROR(quant.Validate());
  if (position_embedding == PositionEmbedding::kRope && head_dim % 2 != 0) {
    return InvalidArgument("head_dim " + std::to_string(head_dim) + " must be even for rope");
  }
  if (!(norm_eps > 0))
    return InvalidArgument("norm_eps must be > 0, got " + std::to_string(norm_eps));
  if (position_embedding == PositionEmbedding::kRope) {
    RETURN_IF_ERROR(ValidateRopeConfig(rope, head_dim, "engine config"));
  }
  if (!attention_windows.empty()) {
    if (static_cast<std::int64_t>(attention_windows.size()) != num_layers) {
      return InvalidArgument("attention_windows lists " + std::to_string(attention_windows.size()) +
                             " layers, the engine has num_layers " + std::to_string(num_layers));
    }
    for (std::size_t i = 0; i < attention_windows.size(); ++i) {
      if (attention_windows[i] < 0) {
        return InvalidArgument("attention_windows[" + std::to_string(i) + "] is " +
                               std::to_string(attention_windows[i]) +
                               ", must be >= 0 (0: full attention)");
      }
    }
  }
  if (tp_size < 1) return InvalidArgument("tp_size " + std::to_string(tp_size) + " must be >= 1");
  if (pp_size < 1 || pp_size > num_layers) {
    return InvalidArgument("pp_size " + std::to_string(pp_size) + " must be in [1, num_layers " +
                           std::to_string(num_layers) +
                           "]: every pipeline stage runs at least one layer");
  }
  const std::string tp = "tp_size " + std::to_string(tp_size);
  if (num_attention_heads % tp_size != 0) {
    return InvalidArgument(tp + " does not divide num_attention_heads " +
                           std::to_string(num_attention_heads));
  }
  if (num_kv_heads >= tp_size ? num_kv_heads % tp_size != 0 : tp_size % num_kv_heads != 0) {
    return InvalidArgument(tp + " and num_kv_heads " + std::to_string(num_kv_heads) +
                           ": one must divide the other (kv heads are split or replicated)");
  }
  if (intermediate_size % tp_size != 0) {
    return InvalidArgument(tp + " does not divide intermediate_size " +
                           std::to_string(intermediate_size));
  }
  const BuildLimits& b = build;
  auto limit = [](const char* name, std::int64_t v, std::int64_t lo, std::int64_t hi) -> Status {
    if (v < lo || v > hi) {
      return InvalidArgument(std::string(name) + " " + std::to_string(v) + " is outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(limit("max_batch_size", b.max_batch_size, 1, 1 << 20));
  RETURN_IF_ERROR(limit("max_input_len", b.max_input_len, 1, INT32_MAX));
  RETURN_IF_ERROR(limit("max_seq_len", b.max_seq_len, b.max_input_len, INT32_MAX));
  RETURN_IF_ERROR(limit("max_num_tokens", b.max_num_tokens, 1, INT32_MAX));
  RETURN_IF_ERROR(limit("tokens_per_block", b.tokens_per_block, 1, 1024));
  if ((b.tokens_per_block & (b.tokens_per_block - 1)) != 0) {
    return InvalidArgument("tokens_per_block " + std::to_string(b.tokens_per_block) +
                           " is not a power of two");
  }
  if (position_embedding == PositionEmbedding::kLearned &&
      b.max_seq_len > max_position_embeddings) {
    return InvalidArgument(
        "max_seq_len " + std::to_string(b.max_seq_len) + " exceeds max_position_embeddings " +
        std::to_string(max_position_embeddings) + " of a model with learned positions");
  }
  return Status::Ok();
}

Result<EngineConfig> LoadEngineConfig(const std::string& engine_dir) {
  const fs::path path = fs::path(engine_dir) / "config.json";
  std::ifstream in(path);
  if (!in) {
    return NotFound("engine config " + path.string() +
                    " not found (engine_dir must hold the output of inflight-build)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return EngineConfigFromJson(ss.str(), path.string());
}

Status SaveEngineConfig(const EngineConfig& config, const std::string& engine_dir) {
  RETURN_IF_ERROR(config.Validate());
  const fs::path path = fs::path(engine_dir) / "config.json";
  const fs::path tmp = fs::path(engine_dir) / "config.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << EngineConfigToJson(config);
    out.close();
    if (!out) return Internal("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return Internal("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace inflight::model
