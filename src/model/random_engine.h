// An engine directory straight from random weights: the bytes inflight-build writes from the
// checkpoint WriteRandomCheckpoint makes with the same options, without writing or reading that
// checkpoint (half the bytes written, none read back; for Llama-3.1-8B that is 16 GB less of each).
#pragma once

#include <string>

#include "inflight/status.h"
#include "model/checkpoint_converter.h"
#include "model/random_checkpoint.h"

namespace inflight::model {

// `build` as inflight-build takes it, minus checkpoint_dir (unused): dtype, tp_size, limits,
// output_dir, and qformat / group_size / kv_cache_fp8 (quantized by the builder's own --qformat
// quantizer, model/quant_sources.h, from the weights as the checkpoint would hold them). The
// engine's config.json comes from CheckpointConfigJson(checkpoint).
Result<BuildSummary> WriteRandomEngine(const RandomCheckpointOptions& checkpoint,
                                       const BuildOptions& build,
                                       const BuildProgressFn& progress = nullptr);

}  // namespace inflight::model
