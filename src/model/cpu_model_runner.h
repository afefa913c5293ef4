// ModelRunner on the CPU: weights mapped from rank0.safetensors in their stored dtype, fp32 math,
// fp32 paged KV pools. Step() validates the whole step before touching the cache.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "model/model_runner.h"
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
  // Thread-safe: concurrent calls run one after another.
  Result<StepOutput> Step(const StepInput& input) override;

 private:
  CpuModelRunner() = default;

  EngineConfig config_;
  std::unique_ptr<SafetensorsFile> weights_file_;
  std::int64_t weight_bytes_ = 0;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  std::unique_ptr<Transformer> transformer_;
  std::int64_t num_blocks_ = 0;
  std::int64_t pool_floats_ = 0;  // per pool (one of K or V of one layer)
  std::vector<LayerKvPools> kv_;  // calloc'd: untouched pages cost no memory until used
  mutable std::mutex step_mutex_;
};

}  // namespace inflight::model
