// What engine_dir (the tensorrt_llm model's gpt_model_path) may name: an engine directory written by
// inflight-build, or a Hugging Face checkpoint folder (config.json with "architectures" and
// *.safetensors), which is converted at load with inflight-build's code (BuildEngine), optionally
// into a cache that is keyed by every byte of the checkpoint and the build options, so a cached
// engine is never stale.
#pragma once

#include <memory>
#include <string>

#include "inflight/status.h"
#include "model/checkpoint_converter.h"

namespace inflight::model {

enum class EngineDirKind : std::uint8_t { kEngine, kHuggingFace };

// An engine (config.json with "format": "inflight-engine") or a Hugging Face checkpoint
// (config.json with "architectures" or "model_type", and safetensors files); anything else is an
// error that says what was expected.
Result<EngineDirKind> ClassifyEngineDir(const std::string& path);

struct EngineLoadOptions {
  // inflight-build's options for a Hugging Face folder (checkpoint_dir and output_dir are set here).
  BuildOptions build;
  // Where converted engines are kept: <cache_dir>/<checkpoint folder name>-<key>/, the key a hash of
  // config.json, the weight files' bytes, the build options and the engine format (so a changed
  // checkpoint or option builds anew). Empty: no cache; the engine is built into a temporary
  // directory that lives as long as the PreparedEngine.
  std::string cache_dir;
};

// An engine directory ready to load. Owns (and removes) the temporary engine of an uncached
// conversion.
class PreparedEngine {
 public:
  ~PreparedEngine();
  PreparedEngine(const PreparedEngine&) = delete;
  PreparedEngine& operator=(const PreparedEngine&) = delete;

  const std::string& dir() const { return dir_; }
  bool converted() const { return kind_ == EngineDirKind::kHuggingFace; }
  bool from_cache() const { return from_cache_; }

 private:
  friend Result<std::unique_ptr<PreparedEngine>> PrepareEngineDir(const std::string&,
                                                                 const EngineLoadOptions&,
                                                                 const BuildProgressFn&);
  PreparedEngine() = default;
  std::string dir_;
  EngineDirKind kind_ = EngineDirKind::kEngine;
  bool from_cache_ = false;
  bool temporary_ = false;
};

// `path` as is when it is an engine; a Hugging Face folder converted (or found in the cache).
// Logs what it does; `progress` follows the conversion's tensors.
Result<std::unique_ptr<PreparedEngine>> PrepareEngineDir(const std::string& path,
                                                         const EngineLoadOptions& options,
                                                         const BuildProgressFn& progress = nullptr);

// The cache key of a checkpoint built with `options` (32 hex digits).
Result<std::string> EngineCacheKey(const std::string& checkpoint_dir, const BuildOptions& options);

}  // namespace inflight::model
