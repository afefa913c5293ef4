// The safetensors file a runner binds its shard's weights from: the engine's rank<N>.safetensors,
// or for an engine that records a random_weights recipe (inflight-build --weights_at_load), the
// same bytes made at load by this process for its own rank only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "model/engine_config.h"
#include "model/model_shard.h"
#include "model/safetensors.h"

namespace inflight::model {

// <engine_dir>/<shard.file_name()>, mapped. With config.random_weights, the rank file is written
// (model/random_engine.h WriteRandomRankFile, several threads) into a private directory under
// /dev/shm (when it has room, else $TMPDIR or /tmp: PickScratchDir), mapped, and unlinked: the
// mapping holds the pages, nothing is left behind, and no rank reads another's bytes. So a
// benchmark engine of any size is made by all ranks at once, in memory, instead of written and read
// back from disk.
Result<std::unique_ptr<SafetensorsFile>> OpenRankWeights(const std::string& engine_dir,
                                                         const EngineConfig& config,
                                                         const ModelShard& shard);

// A directory that may hold made-at-load weights, and its free bytes.
struct ScratchCandidate {
  std::string dir;
  std::uint64_t free_bytes = 0;
};

// Where a rank writes its `bytes`: the first candidate with room for the files of all
// `host_ranks` ranks of this host (they make theirs at the same time, and a mapped file keeps its
// pages), else the first with room for this rank's alone (the others may have chosen elsewhere);
// each file also leaves 1 GiB free. Empty when no candidate has room.
std::string PickScratchDir(const std::vector<ScratchCandidate>& candidates, std::uint64_t bytes,
                           int host_ranks);

}  // namespace inflight::model
