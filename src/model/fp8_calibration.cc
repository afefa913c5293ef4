#include "model/fp8_calibration.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>
#include <thread>

#include "common/logging.h"
#include "model/model_runner.h"
#ifdef INFLIGHT_HAVE_CUDA_RUNNER
#include "model/cuda_model_runner.h"
#endif

namespace inflight::model {
namespace {

namespace fs = std::filesystem;

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Removes the folder when it goes out of scope: a failed calibration leaves no float engine.
struct RemoveOnExit {
  fs::path dir;
  ~RemoveOnExit() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// The runner of the pass, observing into `amax`. A group's collectives already chose (from
// run.device, when the group was made): on a CUDA device (NCCL) the CUDA runner there, host
// collectives the CPU runner.
Result<std::unique_ptr<ModelRunner>> CalibrationRunner(const std::string& engine_dir,
                                                       const CalibrationRun& run,
                                                       std::int64_t kv_tokens,
                                                       std::shared_ptr<ActivationAmax> amax) {
  std::shared_ptr<Collectives> collectives =
      run.group != nullptr ? run.group->collectives() : nullptr;
  const bool group_on_gpu = collectives != nullptr && collectives->device().has_value();
#ifdef INFLIGHT_HAVE_CUDA_RUNNER
  if (group_on_gpu || (collectives == nullptr &&
                       (run.device == CalibrationDevice::kCuda ||
                        (run.device == CalibrationDevice::kAuto && CudaDeviceAvailable())))) {
    CudaRunnerOptions options;
    options.max_kv_tokens = kv_tokens;
    options.observe_amax = amax;
    options.collectives = collectives;
    if (group_on_gpu) options.device = *collectives->device();
    auto cuda = CreateCudaModelRunner(engine_dir, options);
    if (cuda.ok() || run.device == CalibrationDevice::kCuda || group_on_gpu) {
      if (cuda.ok())
        LOG_INFO("calibration: the float engine on the CUDA runner, device {}", options.device);
      return cuda;
    }
    // auto: a float model larger than the device (a 70B in bf16) still calibrates, slowly.
    LOG_WARN("calibration: the CUDA runner cannot take the float engine ({}); on the CPU instead",
             cuda.status().message());
  }
#else
  if (run.device == CalibrationDevice::kCuda) {
    return Unsupported("--calib_device cuda: this build has no CUDA runner; accepted: auto, cpu");
  }
#endif
  RunnerOptions options;
  options.num_threads = run.num_threads;
  if (options.num_threads == 0 && run.group != nullptr) {
    // A rank a process: the host's ranks share its cores rather than each taking all of them.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    options.num_threads = std::max(1, cores / std::max(1, run.group->ranks_on_this_host()));
  }
  options.max_kv_tokens = kv_tokens;
  options.observe_amax = std::move(amax);
  options.collectives = std::move(collectives);
  return CreateCpuModelRunner(engine_dir, options);
}

}  // namespace

Result<CalibrationDevice> ParseCalibrationDevice(const std::string& name) {
  if (name == "auto") return CalibrationDevice::kAuto;
  if (name == "cpu") return CalibrationDevice::kCpu;
  if (name == "cuda") return CalibrationDevice::kCuda;
  return InvalidArgument("--calib_device \"" + name + "\" is not one of auto, cpu, cuda");
}

Result<ActivationAmax> ObserveActivationAmax(const std::string& engine_dir,
                                             const std::vector<VecTokens>& samples,
                                             const CalibrationRun& run,
                                             const CalibrationProgressFn& progress) {
  ASSIGN_OR_RETURN(const EngineConfig config, LoadEngineConfig(engine_dir));
  const std::int64_t tpb = config.build.tokens_per_block;
  // A sample is one sequence of one step: within max_seq_len and the step's tokens.
  const std::int64_t max_len = std::min(config.build.max_seq_len, config.build.max_num_tokens);
  // Steps of whole samples, up to the engine's tokens and sequences a step.
  const std::int64_t step_tokens = std::max<std::int64_t>(config.build.max_num_tokens, 1);
  const std::int64_t step_seqs = std::max<std::int64_t>(config.build.max_batch_size, 1);
  std::vector<std::pair<std::size_t, std::size_t>> steps;  // [first, last) samples
  std::int64_t most_blocks = 0, tokens_total = 0;
  for (std::size_t i = 0; i < samples.size();) {
    std::size_t j = i;
    std::int64_t tokens = 0, blocks = 0;
    while (j < samples.size() && static_cast<std::int64_t>(j - i) < step_seqs) {
      const auto n = std::min<std::int64_t>(static_cast<std::int64_t>(samples[j].size()), max_len);
      if (j > i && tokens + n > step_tokens) break;
      tokens += n;
      blocks += CeilDiv(n, tpb);
      ++j;
    }
    steps.emplace_back(i, j);
    most_blocks = std::max(most_blocks, blocks);
    tokens_total += tokens;
    i = j;
  }

  auto observed = std::make_shared<ActivationAmax>();
  ASSIGN_OR_RETURN(
      auto runner,
      CalibrationRunner(engine_dir, run, std::max<std::int64_t>(most_blocks, 1) * tpb, observed));

  CalibrationProgress done;
  done.samples_total = static_cast<std::int64_t>(samples.size());
  done.tokens_total = tokens_total;
  for (const auto& [first, last] : steps) {
    StepInput step;
    std::int32_t next_block = 0;
    for (std::size_t s = first; s < last; ++s) {
      SequenceStep seq;
      seq.seq_id = static_cast<std::int64_t>(s);
      const auto n = std::min<std::int64_t>(static_cast<std::int64_t>(samples[s].size()), max_len);
      seq.tokens.assign(samples[s].begin(), samples[s].begin() + n);
      seq.logits = SequenceStep::Logits::kNone;  // only the layers' activations are wanted
      for (std::int64_t b = 0; b < CeilDiv(n, tpb); ++b) seq.block_table.push_back(next_block++);
      done.tokens_done += n;
      step.sequences.push_back(std::move(seq));
    }
    if (Result<StepOutput> out = runner->Step(step); !out.ok()) {
      return Status(out.status().code(),
                    "calibration sample " + std::to_string(first) + ": " + out.status().message());
    }
    done.samples_done = static_cast<std::int64_t>(last);
    if (progress) progress(done);
  }
  ActivationAmax amax = *observed;
  if (run.group != nullptr) RETURN_IF_ERROR(run.group->FoldAmax(amax));
  amax.samples = static_cast<std::int64_t>(samples.size());
  amax.tokens = tokens_total;
  return amax;
}

namespace {

Result<ActivationAmax> ObserveOnFloatEngine(const std::string& engine_dir,
                                            const EngineConfig& config,
                                            CalibrationDatasetOptions dataset,
                                            const CalibrationRun& run,
                                            const CalibrationProgressFn& progress) {
  dataset.vocab_size = config.vocab_size;
  dataset.max_seq_length = std::min<std::int64_t>(dataset.max_seq_length, config.build.max_seq_len);
  ASSIGN_OR_RETURN(const std::vector<VecTokens> samples, ReadCalibrationDataset(dataset));
  return ObserveActivationAmax(engine_dir, samples, run, progress);
}

}  // namespace

Result<std::shared_ptr<const ActivationAmax>> CalibrateFromDataset(
    const BuildOptions& build, const FloatEngineWriter& build_float,
    const CalibrationDatasetOptions& dataset, const CalibrationRun& run,
    const CalibrationProgressFn& progress) {
  RETURN_IF_ERROR(CheckCalibrationFlags(build));  // before the pass, which may take hours
  BuildOptions float_build = build;
  float_build.qformat.reset();
  float_build.kv_cache_fp8 = false;
  float_build.calibration = nullptr;
  CalibrationGroup* group = run.group.get();
  float_build.tp_size = group != nullptr ? group->tp_size() : 1;
  float_build.pp_size = group != nullptr ? group->pp_size() : 1;
  float_build.output_dir = (fs::path(build.output_dir) / ".calibration_engine").string();
  if (group != nullptr &&
      (build.tp_size != group->tp_size() || build.pp_size != group->pp_size())) {
    return InvalidArgument(
        "the calibration runs on " + std::to_string(group->tp_size() * group->pp_size()) +
        " processes (tp_size " + std::to_string(group->tp_size()) + " x pp_size " +
        std::to_string(group->pp_size()) + "), but the engine is built at --tp_size " +
        std::to_string(build.tp_size) + " --pp_size " + std::to_string(build.pp_size));
  }
  // Rank 0 writes the float engine and removes it; the others read it between two barriers. A
  // rank that fails returns at once: its process exits and the launcher stops the others (mpirun
  // does), so no rank is left waiting at a barrier for it.
  const bool writer = group == nullptr || group->rank() == 0;
  std::optional<RemoveOnExit> cleanup;
  std::optional<EngineConfig> float_config;
  if (writer) {
    cleanup.emplace();
    cleanup->dir = float_build.output_dir;
    ASSIGN_OR_RETURN(const BuildSummary summary, build_float(float_build));
    float_config = summary.config;
  }
  if (group != nullptr) RETURN_IF_ERROR(group->Barrier());
  if (!float_config) {
    ASSIGN_OR_RETURN(EngineConfig loaded, LoadEngineConfig(float_build.output_dir));
    float_config = std::move(loaded);
  }
  ASSIGN_OR_RETURN(ActivationAmax amax, ObserveOnFloatEngine(float_build.output_dir, *float_config,
                                                             dataset, run, progress));
  // Every rank is done with the float engine before rank 0 removes it.
  if (group != nullptr) RETURN_IF_ERROR(group->Barrier());

  amax.source = fs::path(dataset.path).filename().string() + " (" + std::to_string(amax.samples) +
                " samples, " + std::to_string(amax.tokens) + " tokens)";
  return std::make_shared<const ActivationAmax>(std::move(amax));
}

}  // namespace inflight::model
