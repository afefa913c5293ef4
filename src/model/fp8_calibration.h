// inflight-build --calib_dataset: static FP8 scales from a calibration pass, as TensorRT-LLM's
// quantize script gets them from ModelOpt. The checkpoint is built as a float engine (one rank,
// no quantization) into a folder of the output directory, the dataset's samples run through it
// while the runner records each layer's activation amax (model/activation_amax.h), and the folder
// is removed; the caller then builds the quantized engine with BuildOptions::calibration set.
//
// Where: the CUDA runner (the engine's dtype; fp32 engines in bf16) on device 0 where one is built
// and visible and the float engine fits it, else the CPU runner (fp32 math). Cost: one forward pass
// of every sample, about 2 x parameters FLOPs a token: an 8B model at 512 samples of 512 tokens is
// ~4 PFLOPs, seconds on a GPU and hours on a few CPU cores; --calib_size and --calib_max_seq_length
// bound it.
#pragma once

#include <cstdint>
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

enum class CalibrationDevice : std::uint8_t {
  kAuto,  // CUDA where built, a device is visible and the runner takes the engine; else CPU
  kCpu,
  kCuda,
};
// "auto", "cpu", "cuda" (--calib_device).
Result<CalibrationDevice> ParseCalibrationDevice(const std::string& name);

struct CalibrationRun {
  CalibrationDevice device = CalibrationDevice::kAuto;
  int num_threads = 0;  // CPU: 0 = every core
};

// Runs `samples` (each a prompt from position 0) through the float engine in `engine_dir`, several
// samples a step: the largest |x| at each point of each layer. Samples longer than the engine's
// max_seq_len (or max_num_tokens) are cut. Errors: kCuda without a CUDA build or device.
Result<ActivationAmax> ObserveActivationAmax(const std::string& engine_dir,
                                             const std::vector<VecTokens>& samples,
                                             const CalibrationRun& run,
                                             const CalibrationProgressFn& progress = nullptr);

// Writes the float engine of `build`'s options (quantization off, tp 1, pp 1) into
// <build.output_dir>/.calibration_engine with `build_float` (BuildEngine, or the random engine's
// writer), reads `dataset` (its vocab_size taken from that engine), observes it, removes the
// folder and returns the calibration for BuildOptions::calibration.
using FloatEngineWriter = std::function<Result<BuildSummary>(const BuildOptions&)>;
Result<std::shared_ptr<const ActivationAmax>> CalibrateFromDataset(
    const BuildOptions& build, const FloatEngineWriter& build_float,
    CalibrationDatasetOptions dataset, const CalibrationRun& run,
    const CalibrationProgressFn& progress = nullptr);

}  // namespace inflight::model
