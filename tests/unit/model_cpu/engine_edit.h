// Edits a built engine in place, for engine features whose checkpoint side (the converter) comes
// separately: per-layer attention windows, and Qwen3's q/k norm with random norm weights. The
// engine then holds exactly what inflight-build writes for such a model.
#pragma once

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"
#include "model/engine_config.h"
#include "model/safetensors.h"

namespace inflight::model::testing {

inline Status SetAttentionWindows(const std::string& engine_dir,
                                  std::vector<std::int64_t> windows) {
  ASSIGN_OR_RETURN(EngineConfig c, LoadEngineConfig(engine_dir));
  c.attention_windows = std::move(windows);
  RETURN_IF_ERROR(c.Validate());
  return SaveEngineConfig(c, engine_dir);
}

// Sets qk_norm and adds layers.{i}.q_norm.weight / k_norm.weight ([head_dim], the dtype of the
// layer norms, values in [0.5, 1.5) from `seed`) to rank0.safetensors.
inline Status AddQkNorm(const std::string& engine_dir, std::uint64_t seed) {
  ASSIGN_OR_RETURN(EngineConfig c, LoadEngineConfig(engine_dir));
  const std::string path = (std::filesystem::path(engine_dir) / "rank0.safetensors").string();
  SafetensorsWriter writer;
  DType norm_dtype = DType::kFloat32;
  {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
    for (const std::string& name : file->names()) {
      const TensorInfo* t = file->Find(name);
      if (name == "final_norm.weight") norm_dtype = t->dtype;
      std::vector<std::byte> bytes(t->data, t->data + t->nbytes);
      RETURN_IF_ERROR(writer.AddBytes(name, t->dtype, t->shape, std::move(bytes)));
    }
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    for (const char* which : {"q_norm", "k_norm"}) {
      std::vector<float> values(static_cast<std::size_t>(c.head_dim));
      for (float& v : values) v = dist(rng);
      std::vector<std::byte> bytes(values.size() * DTypeSize(norm_dtype));
      if (norm_dtype == DType::kFloat32) {
        std::memcpy(bytes.data(), values.data(), bytes.size());
      } else {
        std::vector<std::uint16_t> half(values.size());
        ConvertFromFloat(norm_dtype, values.data(), half.data(), half.size());
        std::memcpy(bytes.data(), half.data(), bytes.size());
      }
      RETURN_IF_ERROR(writer.AddBytes("layers." + std::to_string(layer) + "." + which + ".weight",
                                      norm_dtype, {c.head_dim}, std::move(bytes)));
    }
  }
  RETURN_IF_ERROR(writer.Write(path));
  c.qk_norm = true;
  return SaveEngineConfig(c, engine_dir);
}

}  // namespace inflight::model::testing
