// ModelRunner on the CPU: weights mapped from the shard's rank file (rank0.safetensors for one
// process) in their stored dtype, fp32 math, fp32 paged KV pools. Step() validates the whole step
// before touching the cache. The same shape as the CUDA runner: weights (transformer_weights.h),
// the forward pass with its collectives (transformer.h), and this class, which owns the KV pools
// and turns a StepInput into the forward pass's page-table format.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "model/collectives.h"
#include "model/model_runner.h"
#include "model/model_shard.h"
#include "model/safetensors.h"
#include "model/transformer.h"

namespace inflight::model {

class CpuModelRunner final : public ModelRunner {
 public:
  static Result<std::unique_ptr<CpuModelRunner>> Create(const std::string& engine_dir,
                                                        const RunnerOptions& options);
  ~CpuModelRunner() override;

  const EngineConfig& config() const override { return config_; }
  std::int64_t num_kv_blocks() const override { return num_blocks_; }
  const char* device_name() const override { return "cpu"; }
  std::int64_t memory_bytes() const override;
  // Thread-safe: concurrent calls run one after another. Launch, then Complete.
  Result<StepOutput> Step(const StepInput& input) override;
  // The first stage of a pipeline keeps up to pp_size steps in flight: Launch runs its layers,
  // hands the activations on and posts the receive of the step's logits; Complete takes them.
  // Other stages (and pp 1) finish the step in Launch.
  std::int32_t max_steps_in_flight() const override;
  Status Launch(const StepInput& input) override;
  Result<StepOutput> Complete() override;

 private:
  // A launched step: its output, whose logits the last stage may still have to send.
  struct LaunchedStep {
    StepOutput out;
    bool awaiting_logits = false;  // first stage: a receive from the last stage is posted
  };

  CpuModelRunner() = default;
  // Pipeline parallelism: the last stage's logits go to the first stage's ranks (the last stage
  // sends them here; the first posts their receive, finished in Complete).
  Status ReturnToFirstStage(LaunchedStep& step);

  EngineConfig config_;
  ModelShard shard_;
  std::shared_ptr<Collectives> collectives_;  // outlives transformer_, which calls it
  std::unique_ptr<SafetensorsFile> weights_file_;
  std::int64_t weight_bytes_ = 0;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  std::shared_ptr<ActivationAmax> observe_amax_;  // outlives transformer_, which writes it
  std::unique_ptr<Transformer> transformer_;
  std::int64_t num_blocks_ = 0;
  std::int64_t pool_floats_ = 0;    // elements per pool (one of K or V of one layer)
  std::int64_t kv_elem_bytes_ = 4;  // 1 for an FP8 KV cache
  std::vector<LayerKvPools> kv_;    // the shard's layers; calloc'd: untouched pages cost nothing
  std::deque<std::unique_ptr<LaunchedStep>> in_flight_;  // launched, not completed: oldest first
  std::mutex step_mutex_;                                // Step: its Launch and Complete together
  mutable std::mutex pipeline_mutex_;  // Launch, Complete and everything they touch
};

}  // namespace inflight::model
