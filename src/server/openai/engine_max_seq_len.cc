#include "server/openai/engine_max_seq_len.h"

#include <algorithm>
#include <charconv>
#include <fstream>

#include "model/build_defaults.h"

namespace inflight::server::openai {
namespace {

using nlohmann::json;

std::optional<std::int64_t> IntField(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number_integer()) {
    return std::nullopt;
  }
  return object[key].get<std::int64_t>();
}

// The build_max_seq_len parameter ("parameters": {"build_max_seq_len": {"string_value": "512"}}),
// when set to a positive integer; the backend refuses any other value at load.
std::optional<std::int64_t> BuildMaxSeqLenParameter(const json& model_config) {
  const json* parameters = model_config.is_object() && model_config.contains("parameters")
                               ? &model_config["parameters"]
                               : nullptr;
  if (parameters == nullptr || !parameters->contains("build_max_seq_len")) return std::nullopt;
  const json& value = (*parameters)["build_max_seq_len"];
  if (!value.is_object() || !value.contains("string_value") || !value["string_value"].is_string()) {
    return std::nullopt;
  }
  const std::string text = value["string_value"].get<std::string>();
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1) return std::nullopt;
  return n;
}

}  // namespace

std::optional<std::int64_t> EngineMaxSeqLen(const std::string& engine_dir,
                                            const json& model_config) {
  std::ifstream in(engine_dir + "/config.json");
  if (!in) return std::nullopt;
  const json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return std::nullopt;
  for (const char* section : {"build", "build_config"}) {
    if (config.contains(section)) {
      if (auto n = IntField(config[section], "max_seq_len")) return n;
    }
  }
  // A Hugging Face config.json: n_positions is GPT-2's name for max_position_embeddings.
  auto positions = IntField(config, "max_position_embeddings");
  if (!positions) positions = IntField(config, "n_positions");
  if (!positions) return std::nullopt;
  if (auto given = BuildMaxSeqLenParameter(model_config)) return given;
  return std::min<std::int64_t>(*positions, model::kDefaultMaxSeqLenCap);
}

}  // namespace inflight::server::openai
