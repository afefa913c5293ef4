#include "backend/model_state.h"

#include "backend/stream_holdback.h"

#include "backend/triton_error.h"
#include "common/logging.h"
#include "config/model_config_loader.h"

namespace inflight::backend {
namespace {

// inflight-build's options for a gpt_model_path that is a Hugging Face folder: the build_*
// parameters, max_batch_size from the model config, the builder's defaults for the rest.
model::EngineLoadOptions EngineLoadOptionsOf(const config::LlmParams& p) {
  model::EngineLoadOptions o;
  o.cache_dir = p.engine_cache_dir;
  if (!p.build_dtype.empty()) o.build.dtype = ParseDType(p.build_dtype);
  if (p.max_batch_size > 0) o.build.max_batch_size = p.max_batch_size;
  o.build.max_input_len = p.build_max_input_len;
  o.build.max_seq_len = p.build_max_seq_len;
  if (p.build_max_num_tokens) o.build.max_num_tokens = *p.build_max_num_tokens;
  if (p.build_tokens_per_block) o.build.tokens_per_block = *p.build_tokens_per_block;
  return o;
}

bool AnyBuildParameter(const config::LlmParams& p) {
  return !p.engine_cache_dir.empty() || !p.build_dtype.empty() || p.build_max_input_len ||
         p.build_max_seq_len || p.build_max_num_tokens || p.build_tokens_per_block;
}

// Logs a conversion's progress at every tenth of its bytes.
model::BuildProgressFn ProgressLogger(const std::string& model_name) {
  return [model_name, next = std::make_shared<int>(1)](const model::BuildProgress& p) {
    const int tenths =
        p.bytes_total == 0 ? 10 : static_cast<int>(10 * p.bytes_done / p.bytes_total);
    if (tenths < *next) return;
    *next = tenths + 1;
    LOG_INFO("model {}: converting the checkpoint: {}% ({}/{} tensors, {:.1f} of {:.1f} MB)",
             model_name, 10 * tenths, p.tensors_done, p.tensors_total,
             static_cast<double>(p.bytes_done) / 1e6, static_cast<double>(p.bytes_total) / 1e6);
  };
}

}  // namespace

Result<std::unique_ptr<ModelState>> ModelState::Create(TRITONBACKEND_Model* model) {
  auto state = std::unique_ptr<ModelState>(new ModelState());
  state->model_ = model;
  const char* name = nullptr;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelName(model, &name));
  state->name_ = name;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelVersion(model, &state->version_));

  TRITONSERVER_Message* message = nullptr;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelConfig(model, 1, &message));
  const char* json = nullptr;
  std::size_t size = 0;
  Status st = FromTritonError(TRITONSERVER_MessageSerializeToJson(message, &json, &size));
  Result<inference::ModelConfig> cfg =
      st.ok() ? config::ParseModelConfigJson(std::string_view(json, size))
              : Result<inference::ModelConfig>(st);
  TRITONSERVER_MessageDelete(message);
  if (!cfg.ok()) return cfg.status();

  ASSIGN_OR_RETURN(state->params_, config::LlmParams::FromModelConfig(*cfg));
  RETURN_IF_ERROR(state->params_.CheckServed());
  for (const auto& output : cfg->output()) {
    if (output.name() == "context_logits" || output.name() == "generation_logits") {
      if (output.data_type() == inference::TYPE_FP16) state->logits_dtype_ = TRITONSERVER_TYPE_FP16;
    }
  }
  auto engine =
      model::PrepareEngineDir(state->params_.gpt_model_path, EngineLoadOptionsOf(state->params_),
                              ProgressLogger(state->name_));
  if (!engine.ok()) {
    return Status(engine.status().code(),
                  "model '" + state->name_ + "': " + engine.status().message());
  }
  state->engine_ = std::move(engine).value();
  const char* location = nullptr;
  TRITONBACKEND_ArtifactType artifact;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelRepository(model, &artifact, &location));
  ASSIGN_OR_RETURN(state->stream_tokenizer_,
                   LoadStreamTokenizer(state->params_, location != nullptr ? location : ""));
  if (!state->engine_->converted() && AnyBuildParameter(state->params_)) {
    LOG_WARN(
        "model {}: engine_cache_dir and build_* apply only when gpt_model_path is a Hugging Face "
        "checkpoint folder; {} is an engine, they are ignored",
        state->name_, state->params_.gpt_model_path);
  }
  LOG_INFO("model {} v{}: engine {}, batching {}, scheduler {}, decoupled {}", state->name_,
           state->version_, state->engine_->dir(),
           config::BatchingTypeName(state->params_.batching_type),
           config::SchedulerPolicyName(state->params_.batch_scheduler_policy),
           state->params_.decoupled);
  return state;
}

ExecutorConfig ModelState::MakeExecutorConfig() const {
  const config::LlmParams& p = params_;
  ExecutorConfig c;
  c.batching_type = p.batching_type == config::BatchingType::kV1 ? BatchingType::kStatic
                                                                 : BatchingType::kInflight;
  c.max_beam_width = p.max_beam_width;
  if (p.max_queue_size > 0) c.max_queue_size = p.max_queue_size;
  c.normalize_log_probs = p.normalize_log_probs;
  c.iter_stats_max_iterations = static_cast<SizeType>(p.iter_stats_max_iterations);
  c.device = p.device == config::Device::kCuda  ? DeviceKind::kCuda
             : p.device == config::Device::kCpu ? DeviceKind::kCpu
                                                : DeviceKind::kAuto;
  c.busy_poll = p.busy_poll;
  if (p.gpu_device_ids && !p.gpu_device_ids->empty()) {
    c.gpu_device_ids =
        std::vector<int>(p.gpu_device_ids->front().begin(), p.gpu_device_ids->front().end());
  }
  c.scheduler_config.policy = p.batch_scheduler_policy == config::SchedulerPolicy::kMaxUtilization
                                  ? CapacitySchedulerPolicy::kMaxUtilization
                                  : CapacitySchedulerPolicy::kGuaranteedNoEvict;
  c.scheduler_config.enable_chunked_context = p.enable_chunked_context;
  KvCacheConfig& kv = c.kv_cache_config;
  kv.enable_block_reuse = p.enable_kv_cache_reuse;
  kv.max_tokens = p.max_tokens_in_paged_kv_cache;
  kv.free_gpu_memory_fraction = static_cast<float>(p.kv_cache_free_gpu_mem_fraction);
  kv.host_cache_size = p.kv_cache_host_memory_bytes;
  if (p.max_attention_window_size) {
    kv.max_attention_window = std::vector<SizeType>(p.max_attention_window_size->begin(),
                                                    p.max_attention_window_size->end());
  }
  kv.sink_token_length = p.sink_token_length;
  return c;
}

}  // namespace inflight::backend
