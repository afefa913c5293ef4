// The CUDA ModelRunner: weights, KV pools and activations in device memory (fp16 or bf16), the
// forward pass from kernels/cuda, logits copied to the host per the StepOutput contract. Its parts:
// cuda_weights.h (the shard's weights), cuda_transformer.h (the forward pass, with the shard's
// collectives), cuda_graphs.h (decode CUDA graphs), cuda_sampling_stage.h (device sampling).
#pragma once

#include <memory>
#include <string>

#include "model/activation_amax.h"
#include "model/collectives.h"
#include "model/model_runner.h"

namespace inflight::model {

struct CudaRunnerOptions {
  // KV pool: at most max_kv_tokens tokens (0: no token cap) and at most this fraction of the
  // device memory free after weights and activations are allocated. Valid range (0, 1].
  double kv_cache_free_gpu_mem_fraction = 0.9;
  std::int64_t max_kv_tokens = 0;
  int device = 0;  // CUDA device ordinal
  // This process's tensor- and pipeline-parallel group (collectives.h); its sizes must equal the
  // engine's tp_size and pp_size. Null: one process runs the whole engine (tp 1, pp 1).
  std::shared_ptr<Collectives> collectives;
  AttentionLimits attention_limits;
  // Calibration (model/fp8_calibration.h) of a float engine: each step's activation amax is folded
  // into it (resized to the engine's layers when empty); a split engine's rank folds its part
  // (its heads, its MLP columns, its stage's layers). Null: off.
  std::shared_ptr<ActivationAmax> observe_amax;
};

// Loads <engine_dir>/config.json and the weights of the group's rank (rank0.safetensors for one
// process) onto the device. fp32 engines run in bf16.
// Errors: no device, or not enough device memory (the message gives weights, activations and free
// bytes).
Result<std::unique_ptr<ModelRunner>> CreateCudaModelRunner(const std::string& engine_dir,
                                                           const CudaRunnerOptions& options);

// True when a CUDA device is visible (for device "auto").
bool CudaDeviceAvailable();
// How many CUDA devices are visible (0 without a driver or device).
int CudaDeviceCount();

}  // namespace inflight::model
