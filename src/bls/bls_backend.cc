// libtriton_inflight_bls.so: NVIDIA's tensorrt_llm_bls model as a C++ backend. Text in, the
// tokenizer in process, the tensorrt_llm model called through Triton's server C API, text out; no
// Python backend. The entry points only convert and start work (BlsRequest does the rest); a
// watcher passes a client's cancellation on to the calls of its request.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backend/api_version.h"
#include "backend/triton_error.h"
#include "backend/triton_log.h"
#include "bls/bls_config.h"
#include "bls/bls_inputs.h"
#include "bls/bls_request.h"
#include "common/logging.h"
#include "common/steady_clock.h"
#include "config/model_config_loader.h"
#include "triton/core/tritonbackend.h"

namespace inflight::bls {
namespace {

using backend::FromTritonError;
using backend::ToTritonError;

// How often running requests are checked for a client that went away (a streaming request also
// checks on each of its responses).
constexpr std::chrono::milliseconds kCancelCheckPeriod{100};

class ModelState {
 public:
  ModelState() : watcher_([this] { Watch(); }) {}
  ~ModelState() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watcher_.join();
  }

  BlsModel model;

  void Track(const std::shared_ptr<BlsRequest>& request) {
    std::lock_guard lock(mu_);
    running_.push_back(request);
  }

 private:
  void Watch() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, kCancelCheckPeriod, [this] { return stop_; });
      for (auto it = running_.begin(); it != running_.end();) {
        auto request = it->lock();
        if (request == nullptr || request->Done()) {
          it = running_.erase(it);
          continue;
        }
        if (request->ClientCancelled()) request->CancelCalls();
        ++it;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::list<std::weak_ptr<BlsRequest>> running_;
  std::thread watcher_;
};

Result<std::vector<RawTensor>> ReadInputs(TRITONBACKEND_Request* request) {
  uint32_t count = 0;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_RequestInputCount(request, &count));
  std::vector<RawTensor> out;
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_RequestInputByIndex(request, i, &input));
    const char* name = nullptr;
    TRITONSERVER_DataType datatype;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    uint64_t byte_size = 0;
    uint32_t buffers = 0;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_InputProperties(input, &name, &datatype, &shape, &dims,
                                                         &byte_size, &buffers));
    RawTensor t{name, datatype, std::vector<int64_t>(shape, shape + dims), {}};
    t.data.reserve(byte_size);
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* base = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
      int64_t memory_id = 0;
      RETURN_IF_TRITON_ERROR(
          TRITONBACKEND_InputBuffer(input, b, &base, &size, &memory_type, &memory_id));
      if (memory_type == TRITONSERVER_MEMORY_GPU) {
        return InvalidArgument("input '" + t.name +
                               "' is in GPU memory; the BLS model reads host "
                               "memory");
      }
      const char* bytes = static_cast<const char*>(base);
      t.data.insert(t.data.end(), bytes, bytes + size);
    }
    out.push_back(std::move(t));
  }
  return out;
}

Status LoadModel(TRITONBACKEND_Model* triton_model) {
  const char* name = nullptr;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelName(triton_model, &name));
  TRITONSERVER_Message* message = nullptr;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelConfig(triton_model, 1, &message));
  const char* json = nullptr;
  size_t size = 0;
  Status st = FromTritonError(TRITONSERVER_MessageSerializeToJson(message, &json, &size));
  Result<inference::ModelConfig> config =
      st.ok() ? config::ParseModelConfigJson(std::string_view(json, size))
              : Result<inference::ModelConfig>(st);
  (void)FromTritonError(TRITONSERVER_MessageDelete(message));
  if (!config.ok()) return config.status();
  const char* location = nullptr;
  TRITONBACKEND_ArtifactType artifact;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelRepository(triton_model, &artifact, &location));

  auto state = std::make_unique<ModelState>();
  ASSIGN_OR_RETURN(state->model.config, LoadBlsConfig(*config, location));
  auto tokenizer = tokenizer::Tokenizer::Load(state->model.config.tokenizer_dir);
  if (!tokenizer.ok()) {
    return Status(tokenizer.status().code(),
                  "model '" + std::string(name) + "': cannot load the tokenizer of \"" +
                      state->model.config.tokenizer_dir + "\": " + tokenizer.status().message());
  }
  state->model.tokenizer = std::move(tokenizer).value();
  ASSIGN_OR_RETURN(state->model.allocator, HostAllocator::Create());
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelServer(triton_model, &state->model.server));
  LOG_INFO("model '{}': calls '{}' with the tokenizer of {}{}", name,
           state->model.config.llm_model_name, state->model.config.tokenizer_dir,
           state->model.config.accumulate_tokens ? "; streams accumulate tokens" : "");
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelSetState(triton_model, state.get()));
  (void)state.release();  // the model owns it now; freed in ModelFinalize
  return Status::Ok();
}

// Starts one request; answers it with an error when it cannot start. Always releases it.
void Execute(ModelState& state, TRITONBACKEND_ModelInstance* instance,
             TRITONBACKEND_Request* request) {
  const auto now = [] { return static_cast<uint64_t>(SteadyNowNs()); };
  const uint64_t start_ns = now();
  const char* id = "";
  (void)FromTritonError(TRITONBACKEND_RequestId(request, &id));
  TRITONBACKEND_ResponseFactory* factory = nullptr;
  Status st = FromTritonError(TRITONBACKEND_ResponseFactoryNew(&factory, request));
  std::shared_ptr<BlsRequest> running;
  if (st.ok()) {
    running = std::make_shared<BlsRequest>(state.model, factory, id == nullptr ? "" : id);
    auto inputs = ReadInputs(request);
    auto rows = inputs.ok() ? BuildRows(std::move(*inputs), state.model.config)
                            : Result<std::vector<RowRequest>>(inputs.status());
    st = rows.ok() ? running->Start(std::move(*rows)) : rows.status();
  }
  if (!st.ok()) {
    TRITONBACKEND_Response* response = nullptr;
    if (FromTritonError(TRITONBACKEND_ResponseNew(&response, request)).ok()) {
      TRITONSERVER_Error* error = ToTritonError(st);
      (void)FromTritonError(
          TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error));
      TRITONSERVER_ErrorDelete(error);
    }
    running.reset();  // deletes the factory
  } else {
    state.Track(running);
  }
  const uint64_t end_ns = now();
  (void)FromTritonError(TRITONBACKEND_ModelInstanceReportStatistics(
      instance, request, st.ok(), start_ns, start_ns, end_ns, end_ns));
  (void)FromTritonError(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
}

}  // namespace
}  // namespace inflight::bls

using inflight::backend::ToTritonError;
using inflight::bls::ModelState;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* /*backend*/) {
  inflight::backend::UseTritonLog();
  return inflight::backend::CheckBackendApiVersion("inflight_bls");
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  try {
    return ToTritonError(inflight::bls::LoadModel(model));
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, e.what());
  }
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelState(model, &state);
  if (err != nullptr) return err;
  delete static_cast<ModelState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance*) {
  return nullptr;  // instances share the model's tokenizer and allocator
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance*) {
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  TRITONBACKEND_Model* model = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err != nullptr) return err;
  void* state = nullptr;
  err = TRITONBACKEND_ModelState(model, &state);
  if (err != nullptr) return err;
  for (uint32_t i = 0; i < request_count; ++i) {
    try {
      inflight::bls::Execute(*static_cast<ModelState*>(state), instance, requests[i]);
    } catch (const std::exception& e) {
      LOG_ERROR("tensorrt_llm_bls: {}", e.what());
    }
  }
  return nullptr;
}

}  // extern "C"
