#include "model/engine_source.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/logging.h"
#include "model/content_hash.h"
#include "model/safetensors.h"

namespace inflight::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kExpected =
    "engine_dir must name an engine directory (inflight-build's output: config.json with "
    "\"format\": \"inflight-engine\") or a Hugging Face checkpoint folder (config.json with "
    "\"architectures\", and *.safetensors)";

std::string Text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string OptionsText(const BuildOptions& o) {
  auto opt = [](const auto& v) { return v ? std::to_string(*v) : std::string("default"); };
  return std::string("dtype ") + (o.dtype ? DTypeName(*o.dtype) : "default") + " tp " +
         std::to_string(o.tp_size) + " pp " + std::to_string(o.pp_size) + " max_batch_size " +
         std::to_string(o.max_batch_size) + " max_input_len " + opt(o.max_input_len) +
         " max_seq_len " + opt(o.max_seq_len) + " max_num_tokens " +
         std::to_string(o.max_num_tokens) + " tokens_per_block " +
         std::to_string(o.tokens_per_block);
}

// A name no other process picks: <prefix>.partial-<pid>-<n>.
std::string PartialName(const fs::path& final_dir) {
  static std::atomic<int> counter{0};
  return final_dir.string() + ".partial-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

Status Convert(const BuildOptions& build, const BuildProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto summary = BuildEngine(build, progress);
  if (!summary.ok()) {
    std::error_code ec;
    fs::remove_all(build.output_dir, ec);
    return Status(summary.status().code(), "converting the Hugging Face checkpoint " +
                                               build.checkpoint_dir + ": " +
                                               summary.status().message());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LOG_INFO("converted {} into {}: {} tensors, {:.1f} MB, {:.1f} s", build.checkpoint_dir,
           build.output_dir, summary->num_tensors, static_cast<double>(summary->num_bytes) / 1e6,
           seconds);
  return Status::Ok();
}

}  // namespace

Result<EngineDirKind> ClassifyEngineDir(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return NotFound("engine_dir " + path + " is not a directory; " + kExpected);
  }
  const fs::path config = fs::path(path) / "config.json";
  if (!fs::exists(config, ec)) {
    return NotFound("engine config " + config.string() + " not found; " + kExpected);
  }
  const json j = json::parse(Text(config), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument(config.string() + " is not a JSON object; " + kExpected);
  }
  if (j.contains("format")) {
    if (j["format"] == "inflight-engine") return EngineDirKind::kEngine;
    return InvalidArgument(config.string() + ": \"format\" is " + j["format"].dump() + "; " +
                           kExpected);
  }
  if (!j.contains("architectures") && !j.contains("model_type")) {
    return InvalidArgument(config.string() + " has neither \"format\" nor \"architectures\"; " +
                           kExpected);
  }
  auto shards = ListCheckpointShards(path);
  if (!shards.ok() || shards->empty()) {
    return Status(shards.ok() ? StatusCode::kNotFound : shards.status().code(),
                  "Hugging Face checkpoint " + path + " without weights: " +
                      (shards.ok() ? std::string("no *.safetensors") : shards.status().message()) +
                      "; " + kExpected);
  }
  return EngineDirKind::kHuggingFace;
}

Result<std::string> EngineCacheKey(const std::string& checkpoint_dir, const BuildOptions& options) {
  BuildOptions o = options;
  o.checkpoint_dir = checkpoint_dir;
  std::vector<std::string> files = {(fs::path(checkpoint_dir) / "config.json").string()};
  std::error_code ec;
  const fs::path index = fs::path(checkpoint_dir) / "model.safetensors.index.json";
  if (fs::exists(index, ec)) files.push_back(index.string());
  ASSIGN_OR_RETURN(std::vector<std::string> shards, ListCheckpointShards(checkpoint_dir));
  files.insert(files.end(), shards.begin(), shards.end());
  // The engine config this build resolves (every option and what the converter makes of
  // config.json), and the converter's version for what the config does not show (weight layout).
  ASSIGN_OR_RETURN(EngineConfig config, MakeEngineConfig(o, /*log_reading=*/false));
  const std::string extra = "converter " + std::to_string(kConverterVersion) + "\n" +
                            OptionsText(o) + "\n" + EngineConfigToJson(config);
  return HashFiles(files, extra);
}

PreparedEngine::~PreparedEngine() {
  if (temporary_) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

Result<std::unique_ptr<PreparedEngine>> PrepareEngineDir(const std::string& path,
                                                         const EngineLoadOptions& options,
                                                         const BuildProgressFn& progress) {
  ASSIGN_OR_RETURN(const EngineDirKind kind, ClassifyEngineDir(path));
  std::unique_ptr<PreparedEngine> engine(new PreparedEngine());
  engine->kind_ = kind;
  if (kind == EngineDirKind::kEngine) {
    engine->dir_ = path;
    return engine;
  }
  BuildOptions build = options.build;
  build.checkpoint_dir = path;
  std::error_code ec;
  if (options.cache_dir.empty()) {
    std::string pattern = (fs::temp_directory_path(ec) / "inflight-engine-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Internal("cannot create a temporary directory for the engine of " + path);
    }
    build.output_dir = pattern;
    LOG_INFO(
        "engine_dir {} is a Hugging Face checkpoint: converting it ({}) into {}, removed "
        "when the model unloads (set engine_cache_dir to keep it)",
        path, OptionsText(build), pattern);
    RETURN_IF_ERROR(Convert(build, progress));
    engine->dir_ = pattern;
    engine->temporary_ = true;
    return engine;
  }

  LOG_INFO("engine_dir {} is a Hugging Face checkpoint: hashing it for the engine cache {}", path,
           options.cache_dir);
  ASSIGN_OR_RETURN(const std::string key, EngineCacheKey(path, build));
  const fs::path name = fs::path(path).lexically_normal().filename().empty()
                            ? fs::path(path).lexically_normal().parent_path().filename()
                            : fs::path(path).lexically_normal().filename();
  const fs::path final_dir = fs::path(options.cache_dir) / (name.string() + "-" + key);
  engine->dir_ = final_dir.string();
  if (fs::exists(final_dir / "config.json", ec)) {
    LOG_INFO("engine cache: {} holds the engine of {} ({}); no conversion", final_dir.string(),
             path, OptionsText(build));
    engine->from_cache_ = true;
    return engine;
  }
  fs::create_directories(options.cache_dir, ec);
  if (ec) {
    return Internal("cannot create engine_cache_dir " + options.cache_dir + ": " + ec.message());
  }
  build.output_dir = PartialName(final_dir);
  LOG_INFO("engine cache: no engine for key {}: converting {} ({})", key, path, OptionsText(build));
  RETURN_IF_ERROR(Convert(build, progress));
  {
    const json source = {{"checkpoint", fs::absolute(path, ec).string()},
                         {"key", key},
                         {"build", OptionsText(build)}};
    std::ofstream(fs::path(build.output_dir) / "source.json") << source.dump(2) << "\n";
  }
  // Renamed whole: a reader sees the complete engine or none. Another process may have won the
  // same race; its engine has the same key, so either is the one wanted.
  fs::rename(build.output_dir, final_dir, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(build.output_dir, ignored);
    if (!fs::exists(final_dir / "config.json", ignored)) {
      return Internal("cannot move the converted engine to " + final_dir.string() + ": " +
                      ec.message());
    }
  }
  return engine;
}

}  // namespace inflight::model
