// One request from the BLS model to the tensorrt_llm model through Triton's server C API
// (TRITONSERVER_InferenceRequestNew ... TRITONSERVER_ServerInferAsync), so that it runs the same
// under tritonserver and inflight-server. Each response of the called model reaches the sink as
// host tensors; the last one is followed by OnLlmDone (or replaced by OnLlmError).
//
// NOTE: this is the one place that calls another model. The draft-model speculative path (a draft
// model proposes tokens, tensorrt_llm checks them with draft_input_ids, repeat) chains calls here
// without changing what the sink sees.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bls/raw_tensor.h"
#include "common/status.h"
#include "triton/core/tritonserver.h"

namespace inflight::bls {

class LlmSink {
 public:
  virtual ~LlmSink() = default;
  // One response's outputs, host copies. `final`: the called model said it was the last.
  virtual void OnLlmResponse(std::vector<RawTensor> outputs, bool final) = 0;
  // The request failed; nothing follows.
  virtual void OnLlmError(const Status& status) = 0;
  // The request ended (after its last response, which may have come with it).
  virtual void OnLlmDone() = 0;
};

// Allocates the called model's outputs in host memory (malloc/free); one per BLS model.
class HostAllocator {
 public:
  static Result<std::unique_ptr<HostAllocator>> Create();
  ~HostAllocator();
  TRITONSERVER_ResponseAllocator* get() const { return allocator_; }

 private:
  TRITONSERVER_ResponseAllocator* allocator_ = nullptr;
};

class LlmCall : public std::enable_shared_from_this<LlmCall> {
 public:
  LlmCall(TRITONSERVER_Server* server, TRITONSERVER_ResponseAllocator* allocator,
          std::string model_name, std::shared_ptr<LlmSink> sink)
      : server_(server),
        allocator_(allocator),
        model_(std::move(model_name)),
        sink_(std::move(sink)) {}

  // Sends the request; an error here means no callback will come.
  // The inputs are kept until the server releases the request: tritonserver reads them in place.
  Status Start(const std::string& request_id, std::vector<RawTensor> inputs,
               const std::vector<std::string>& requested_outputs);
  // Asks the called model to stop (TRITONSERVER_InferenceRequestCancel); responses may still come.
  void Cancel();

 private:
  static void OnRelease(TRITONSERVER_InferenceRequest* request, uint32_t flags, void* userp);
  static void OnResponse(TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp);

  TRITONSERVER_Server* const server_;
  TRITONSERVER_ResponseAllocator* const allocator_;
  const std::string model_;
  std::shared_ptr<LlmSink> sink_;
  std::vector<RawTensor> inputs_;
  std::mutex mu_;
  // The request until the server releases it (then deleted; a later Cancel has nothing to reach).
  TRITONSERVER_InferenceRequest* request_ = nullptr;
  bool released_ = false;
};

}  // namespace inflight::bls
