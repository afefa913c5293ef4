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
#include "model/collectives.h"

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

// The processes of a calibration split over tp_size x pp_size ranks, one rank each (a float model
// larger than one GPU; fp8_calibration_mpi.h makes it over MPI). Every rank runs the same samples
// through its rank of the float engine; the amax a rank sees at a point is that of its part (its
// heads, its MLP columns, its layers), so the largest over the ranks is the whole model's.
class CalibrationGroup {
 public:
  virtual ~CalibrationGroup() = default;
  virtual int rank() const = 0;  // in the group: 0 writes the float engine and the final one
  virtual std::int32_t tp_size() const = 0;
  virtual std::int32_t pp_size() const = 0;
  // The runner's collectives for this rank (host collectives for the CPU runner, NCCL on a GPU).
  virtual std::shared_ptr<Collectives> collectives() const = 0;
  // The group's ranks on this host, this one included: on the CPU they share its cores.
  virtual int ranks_on_this_host() const = 0;
  // Returns when every rank called it: rank 0's float engine is written before others read it.
  virtual Status Barrier() = 0;
  // Every rank's amax folded into each rank's: the largest value at each point, NaN where any rank
  // saw one; samples and tokens stay (every rank ran the same ones).
  virtual Status FoldAmax(ActivationAmax& amax) = 0;
};

struct CalibrationRun {
  CalibrationDevice device = CalibrationDevice::kAuto;
  int num_threads = 0;  // CPU: 0 = every core (a group's: the host's cores over its ranks there)
  // Null: this process runs the float engine whole (tp 1, pp 1). Set: the float engine is built at
  // the group's tp_size x pp_size and this process runs its rank where the group's collectives are
  // (NCCL on a CUDA device, else the CPU through MPI), chosen from `device` when the group was
  // made.
  std::shared_ptr<CalibrationGroup> group;
};

// Runs `samples` (each a prompt from position 0) through the float engine in `engine_dir`, several
// samples a step: the largest |x| at each point of each layer. Samples longer than the engine's
// max_seq_len (or max_num_tokens) are cut. With run.group, this process runs its rank of the split
// engine and every rank returns the group's fold. Errors: kCuda without a CUDA build or device.
Result<ActivationAmax> ObserveActivationAmax(const std::string& engine_dir,
                                             const std::vector<VecTokens>& samples,
                                             const CalibrationRun& run,
                                             const CalibrationProgressFn& progress = nullptr);

// Writes the float engine of `build`'s options (quantization off; tp 1, pp 1, or the group's
// sizes) into <build.output_dir>/.calibration_engine with `build_float` (BuildEngine, or the
// random engine's writer; rank 0 of a group writes it, every other rank waits), reads `dataset`
// (its vocab_size taken from that engine), observes it, removes the folder and returns the
// calibration for BuildOptions::calibration (on every rank of a group).
using FloatEngineWriter = std::function<Result<BuildSummary>(const BuildOptions&)>;
Result<std::shared_ptr<const ActivationAmax>> CalibrateFromDataset(
    const BuildOptions& build, const FloatEngineWriter& build_float,
    const CalibrationDatasetOptions& dataset, const CalibrationRun& run,
    const CalibrationProgressFn& progress = nullptr);

}  // namespace inflight::model
