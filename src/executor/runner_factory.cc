#include "executor/runner_factory.h"

#include <algorithm>

#include "common/logging.h"
#include "executor/cpu_kv_sizing.h"
#include "model/model_shard.h"
#ifdef INFLIGHT_HAVE_CUDA_RUNNER
#include "model/cuda_model_runner.h"
#endif

namespace inflight::executor {
namespace {

// The runtime's attention limits from the KV cache config, which the runners resolve against the
// engine's own windows (model/attention_windows.h).
model::AttentionLimits AttentionLimitsOf(const KvCacheConfig& kv) {
  model::AttentionLimits limits;
  if (kv.max_attention_window) {
    limits.max_attention_window.assign(kv.max_attention_window->begin(),
                                       kv.max_attention_window->end());
  }
  limits.sink_token_length = kv.sink_token_length.value_or(0);
  return limits;
}

#ifdef INFLIGHT_HAVE_CUDA_RUNNER
// The device of this process: gpu_device_ids' first without a group; with one, the device its
// collectives run on (chosen by the node-local rank, backend/group_collectives.h), else the group
// rank's entry.
Result<int> CudaDeviceOf(const ExecutorConfig& config, const model::Collectives* group) {
  const bool have_ids = config.gpu_device_ids && !config.gpu_device_ids->empty();
  if (group == nullptr) return have_ids ? config.gpu_device_ids->front() : 0;
  if (auto device = group->device()) return *device;
  const std::int64_t rank = std::int64_t{group->pp_rank()} * group->tp_size() + group->tp_rank();
  if (have_ids) {
    const auto& ids = *config.gpu_device_ids;
    if (rank >= static_cast<std::int64_t>(ids.size())) {
      return InvalidArgument("gpu_device_ids lists " + std::to_string(ids.size()) +
                             " devices, but this process is rank " + std::to_string(rank) +
                             " of a group of tp_size " + std::to_string(group->tp_size()) +
                             " x pp_size " + std::to_string(group->pp_size()) +
                             ": give one id per rank");
    }
    return ids[static_cast<std::size_t>(rank)];
  }
  return static_cast<int>(rank % std::max(1, model::CudaDeviceCount()));
}
#endif

}  // namespace

Result<std::unique_ptr<model::ModelRunner>> CreateModelRunner(
    const std::string& engine_dir, const model::EngineConfig& engine, const ExecutorConfig& config,
    std::shared_ptr<model::Collectives> collectives) {
#ifdef INFLIGHT_HAVE_CUDA_RUNNER
  if (config.device == DeviceKind::kCuda ||
      (config.device == DeviceKind::kAuto && model::CudaDeviceAvailable())) {
    model::CudaRunnerOptions o;
    o.kv_cache_free_gpu_mem_fraction =
        config.kv_cache_config.free_gpu_memory_fraction.value_or(0.9f);
    if (config.kv_cache_config.max_tokens) o.max_kv_tokens = *config.kv_cache_config.max_tokens;
    ASSIGN_OR_RETURN(o.device, CudaDeviceOf(config, collectives.get()));
    o.attention_limits = AttentionLimitsOf(config.kv_cache_config);
    o.collectives = collectives;
    LOG_INFO("executor: CUDA runner on device {}", o.device);
    return model::CreateCudaModelRunner(engine_dir, o);
  }
#else
  if (config.device == DeviceKind::kCuda) {
    return Unsupported(
        "device \"cuda\" was requested, but this build has no CUDA runtime "
        "(built with INFLIGHT_CUDA=OFF or without a CUDA toolkit); accepted here: auto, cpu");
  }
#endif
  // The KV pool holds this rank's shard only: its stage's layers and its kv heads.
  const model::Collectives* group = collectives.get();
  ASSIGN_OR_RETURN(
      model::ModelShard shard,
      model::MakeModelShard(engine, group ? group->tp_rank() : 0, group ? group->tp_size() : 1,
                            group ? group->pp_rank() : 0, group ? group->pp_size() : 1));
  ASSIGN_OR_RETURN(CpuKvCacheSize kv, SizeCpuKvCache(engine, shard, config.kv_cache_config));
  model::RunnerOptions options;
  options.max_kv_tokens = kv.tokens;
  options.attention_limits = AttentionLimitsOf(config.kv_cache_config);
  options.collectives = std::move(collectives);
  LOG_INFO("executor: CPU runner, KV cache {} tokens ({} MiB) for layers [{}, {})", kv.tokens,
           kv.tokens * kv.bytes_per_token / (1 << 20), shard.first_layer, shard.last_layer);
  return model::CreateCpuModelRunner(engine_dir, options);
}

}  // namespace inflight::executor
