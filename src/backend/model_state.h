// Per-model state of the LLM backend: the parsed configuration, the engine it names (a Hugging Face
// folder converted once per model load, shared by the instances) and the executor settings.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "config/llm_params.h"
#include "inflight/executor.h"
#include "model/engine_source.h"
#include "tokenizer/tokenizer.h"
#include "triton/core/tritonbackend.h"

namespace inflight::backend {

class ModelState {
 public:
  static Result<std::unique_ptr<ModelState>> Create(TRITONBACKEND_Model* model);

  const std::string& name() const { return name_; }
  std::uint64_t version() const { return version_; }
  const config::LlmParams& params() const { return params_; }
  TRITONSERVER_DataType logits_dtype() const { return logits_dtype_; }
  TRITONBACKEND_Model* triton_model() const { return model_; }
  // The engine directory the executors load: gpt_model_path, or its conversion.
  const std::string& engine_dir() const { return engine_->dir(); }

  // The tokenizer whose characters streamed responses keep whole, or nullptr
  // (stream_holdback.h).
  const tokenizer::Tokenizer* stream_tokenizer() const { return stream_tokenizer_.get(); }

  // The executor configuration the parameters describe.
  ExecutorConfig MakeExecutorConfig() const;
  // 0 for the model's first instance, 1 for the next, ... (orchestrator mode's gpu_device_ids
  // group of the instance).
  int TakeInstanceIndex() const { return next_instance_index_++; }

 private:
  TRITONBACKEND_Model* model_ = nullptr;
  std::string name_;
  std::uint64_t version_ = 0;
  config::LlmParams params_;
  TRITONSERVER_DataType logits_dtype_ = TRITONSERVER_TYPE_FP32;
  std::unique_ptr<model::PreparedEngine> engine_;
  mutable std::atomic<int> next_instance_index_{0};
  std::unique_ptr<tokenizer::Tokenizer> stream_tokenizer_;
};

}  // namespace inflight::backend
