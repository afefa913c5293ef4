// Hugging Face checkpoint (config.json + *.safetensors) → engine directory (docs/engine_format.md).
//
// Weights are converted engine tensor by engine tensor: each is gathered from the memory-mapped
// checkpoint (fusing q/k/v and gate/up, transposing GPT-2's Conv1D, taking this rank's slice,
// converting the dtype) into a buffer that is written out; a few tensors are gathered and written
// at once (ParallelSafetensorsWriter), so memory stays at a few times the largest engine tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"
#include "model/activation_amax.h"
#include "model/engine_config.h"
#include "model/hf_quant_config.h"
#include "model/parallel_safetensors_writer.h"
#include "model/safetensors.h"
#include "model/weight_plan.h"

namespace inflight::model {

// The builder's flags (see inflight-build --help). Unset optionals take the defaults written beside
// them.
struct BuildOptions {
  std::string checkpoint_dir;  // required: HF folder with config.json and safetensors
  std::string output_dir;      // required: created if missing; must differ from above
  // Default: config.json's dtype (5.x) or torch_dtype (4.x), else the weights' own dtype.
  std::optional<DType> dtype;
  std::int32_t tp_size = 1;                   // >= 1, must divide the heads
  std::int32_t pp_size = 1;                   // >= 1, at most num_layers
  std::int32_t max_batch_size = 256;          // >= 1
  std::optional<std::int32_t> max_input_len;  // default: min(1024, max_seq_len) (build_defaults.h)
  std::optional<std::int32_t> max_seq_len;    // default: min(max_position_embeddings, 2048) (ditto)
  std::int32_t max_num_tokens = 8192;         // >= 1
  std::int32_t tokens_per_block = 64;         // power of two in [1, 1024]
  // --qformat (TensorRT-LLM quantize.py's name): quantize a float checkpoint's decoder linears at
  // build time. Unset: as the checkpoint is (float, or pre-quantized with its own settings).
  std::optional<QuantAlgo> qformat;
  std::int64_t group_size = 128;  // --group_size: int4_wo's input columns per scale, >= 2
  bool kv_cache_fp8 = false;      // --kv_cache_dtype fp8
  // --calib_dataset, observed by model/fp8_calibration.h: --qformat fp8 gets per-tensor weight
  // scales and static input scales, --kv_cache_dtype fp8 its KV scales from it. Null: FP8
  // activations are scaled per token at run time and the KV cache scales are 1.
  std::shared_ptr<const ActivationAmax> calibration;
};

struct BuildProgress {
  std::int32_t rank = 0;
  std::string tensor;  // engine name of the tensor just written
  std::int64_t tensors_done = 0;
  std::int64_t tensors_total = 0;
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
};
using BuildProgressFn = std::function<void(const BuildProgress&)>;

struct BuildSummary {
  EngineConfig config;
  std::vector<std::string> checkpoint_files;  // the shards read
  std::vector<std::string> output_files;      // rank files, then config.json
  std::int64_t num_tensors = 0;               // over all ranks
  std::uint64_t num_bytes = 0;                // of weights, over all ranks
};

// The converter's version: bump it when BuildEngine would write a different engine from the same
// checkpoint and options (a weight layout change, say). Engine caches key on it (engine_source.h).
constexpr int kConverterVersion = 1;

// Reads <checkpoint_dir>/config.json (model/hf_config.h) and applies the options: the engine
// config that BuildEngine writes. With log_reading, logs the config.json keys it did not read and
// the RoPE it will compute.
Result<EngineConfig> MakeEngineConfig(const BuildOptions& options, bool log_reading = true);
// The same from the text of a Hugging Face config.json (`source` names it in errors);
// options.checkpoint_dir is not used. weights_dtype: the dtype when neither options.dtype nor the
// config names one (an error when that is nullopt too). file_quant: quantization settings from a
// file beside config.json (ModelOpt's hf_quant_config.json), or nullptr.
Result<EngineConfig> MakeEngineConfigFromJson(const std::string& hf_config_json,
                                              const std::string& source,
                                              const BuildOptions& options,
                                              std::optional<DType> weights_dtype,
                                              bool log_reading = true,
                                              const QuantConfig* file_quant = nullptr);

// The quantization a checkpoint folder was published with: config.json's quantization_config, or
// ModelOpt's hf_quant_config.json beside it (format kNone when neither).
Result<CheckpointQuantization> ReadCheckpointQuantization(const std::string& checkpoint_dir);

// Whether BuildOptions::calibration has a use: --qformat fp8 or --kv_cache_dtype fp8 set, and the
// checkpoint (when options.checkpoint_dir is set) not pre-quantized with scales of its own.
Status CheckCalibrationFlags(const BuildOptions& options);

// Checks the whole checkpoint (every needed tensor present, with the expected shape and a float
// dtype) before writing anything, then writes rank<N>.safetensors for every rank and config.json
// last.
Result<BuildSummary> BuildEngine(const BuildOptions& options,
                                 const BuildProgressFn& progress = nullptr);

// Fills engine tensor `weight` (its pieces stacked along rows) as `dtype` into dst. Called on
// several threads at once, for different tensors.
using EngineWeightFiller =
    std::function<Status(const EngineWeight& weight, DType dtype, std::byte* dst)>;

// The writing half of BuildEngine, for any source of weights: removes config.json and rank files
// beyond config.tp_size x pp_size from `output_dir`, writes rank<N>.safetensors (several tensors
// filled and written at once) and config.json last, so an interrupted build leaves no loadable
// engine. summary.checkpoint_files is left empty.
Result<BuildSummary> WriteEngineFiles(const EngineConfig& config, const EngineWeightFiller& fill,
                                      const std::string& output_dir,
                                      const BuildProgressFn& progress = nullptr);

// The bytes of engine tensor `w` stored as `dtype`.
std::uint64_t EngineWeightBytes(const EngineWeight& w, DType dtype);

// The tensors of rank file `rank` as stored: QuantizeRankPlan(config, PlanFileWeights(config,
// rank)).
std::vector<EngineWeight> RankFilePlan(const EngineConfig& config, std::int32_t rank);

// The number and bytes of the tensors in `plan` as stored, added to summary->num_tensors and
// summary->num_bytes.
void CountPlan(const EngineConfig& config, const std::vector<EngineWeight>& plan,
               BuildSummary* summary);

// Removes rank<first>.safetensors, rank<first + 1>.safetensors, ... from `dir` up to the first one
// that is not there (files of an earlier build of the same directory).
void RemoveRankFilesFrom(const std::string& dir, std::int32_t first);

// The writer threads for building `config`'s rank files: one a core up to 16 when quantizing (the
// CPU-bound part), else 0 (the writer's default).
unsigned RankFileWorkers(const EngineConfig& config);

// One rank file of WriteEngineFiles: `plan` (QuantizeRankPlan(config, PlanFileWeights(config,
// rank))) filled by `fill` into `path` ("<path>.tmp", renamed when complete). workers: the
// writer's (0: its default); progress: after each tensor.
Status WriteEngineRankFile(const EngineConfig& config, const std::vector<EngineWeight>& plan,
                           const EngineWeightFiller& fill, const std::string& path,
                           unsigned workers,
                           const ParallelSafetensorsWriter::ProgressFn& progress = nullptr);

// Writes `piece` of `source` (the checkpoint tensor it names; unused for a zero piece) as `to`:
// (row_end - row_begin) x (col_end - col_begin) elements, row-major. `scratch` is reused between
// calls.
void GatherWeightPiece(const TensorInfo* source, const WeightPiece& piece, DType to, std::byte* dst,
                       std::vector<float>* scratch);

}  // namespace inflight::model
