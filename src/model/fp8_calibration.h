// inflight-build --calib_dataset: static FP8 scales from a calibration pass, as TensorRT-LLM's
// quantize script gets them from ModelOpt. The checkpoint is built as a float engine (one rank,
// no quantization) into a folder of the output directory, the dataset's samples run through it on
// the CPU runner (fp32 math) while it records each layer's activation amax
// (model/activation_amax.h), and the folder is removed; the caller then builds the quantized
// engine with BuildOptions::calibration set.
//
// Cost: one forward pass of every sample on the CPU, about 2 x parameters FLOPs a token (an 8B
// model at 512 samples of 512 tokens is ~4 PFLOPs: hours on a few cores); --calib_size and
// --calib_max_seq_length bound it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "inflight/types.h"
#include "model/activation_amax.h"
#include "model/calibration_dataset.h"
#include "model/checkpoint_converter.h"

namespace inflight::model {

struct CalibrationProgress {
  std::int64_t samples_done = 0, samples_total = 0;
  std::int64_t tokens_done = 0, tokens_total = 0;
};
using CalibrationProgressFn = std::function<void(const CalibrationProgress&)>;

// Runs `samples` (each a prompt from position 0) through the float engine in `engine_dir` on the
// CPU runner with `num_threads` threads (0: every core), several samples a step: the largest |x|
// at each point of each layer. Samples longer than the engine's max_seq_len are cut.
Result<ActivationAmax> ObserveActivationAmax(const std::string& engine_dir,
                                             const std::vector<VecTokens>& samples, int num_threads,
                                             const CalibrationProgressFn& progress = nullptr);

// Writes the float engine of `build`'s options (quantization off, tp 1, pp 1) into
// <build.output_dir>/.calibration_engine with `build_float` (BuildEngine, or the random engine's
// writer), reads `dataset` (its vocab_size taken from that engine), observes it, removes the
// folder and returns the calibration for BuildOptions::calibration.
using FloatEngineWriter = std::function<Result<BuildSummary>(const BuildOptions&)>;
Result<std::shared_ptr<const ActivationAmax>> CalibrateFromDataset(
    const BuildOptions& build, const FloatEngineWriter& build_float,
    CalibrationDatasetOptions dataset, int num_threads,
    const CalibrationProgressFn& progress = nullptr);

}  // namespace inflight::model
