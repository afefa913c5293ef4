// An engine directory straight from random weights: the bytes inflight-build writes from the
// checkpoint WriteRandomCheckpoint makes with the same options, without writing or reading that
// checkpoint (half the bytes written, none read back; for Llama-3.1-8B that is 16 GB less of each).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "model/checkpoint_converter.h"
#include "model/random_checkpoint.h"

namespace inflight::model {

// `build` as inflight-build takes it, minus checkpoint_dir (unused): dtype, tp_size, limits,
// output_dir, and qformat / group_size / kv_cache_fp8 (quantized by the builder's own --qformat
// quantizer, model/quant_sources.h, from the weights as the checkpoint would hold them). The
// engine's config.json comes from CheckpointConfigJson(checkpoint). With at_load, only config.json
// is written, recording the recipe: each process makes its rank file's bytes when it loads
// (WriteRandomRankFile); the recipe (a preset and a seed) must give back `checkpoint`.
Result<BuildSummary> WriteRandomEngine(
    const RandomCheckpointOptions& checkpoint, const BuildOptions& build,
    const BuildProgressFn& progress = nullptr,
    const std::optional<RandomWeightsRecipe>& at_load = std::nullopt);

// The random checkpoint options of an engine's random_weights recipe.
Result<RandomCheckpointOptions> RandomOptionsOf(const EngineConfig& config);

// A rank file of an engine with a random_weights recipe, written to `path` ("<path>.tmp", renamed
// when complete): `plan` is the rank's RankFilePlan (model/checkpoint_converter.h), and the bytes
// are those WriteRandomEngine would have written to its rank<N>.safetensors.
Status WriteRandomRankFile(const EngineConfig& config, const std::vector<EngineWeight>& plan,
                           const std::string& path);

}  // namespace inflight::model
