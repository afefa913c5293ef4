#include "server/inference_request.h"

#include <cstring>

#include "common/steady_clock.h"
#include "server/backend_objects.h"

namespace inflight::server {

uint64_t NowNs() {
  return static_cast<uint64_t>(SteadyNowNs());
}

const void* RequestParameter::ValuePointer() const {
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING:
      return string_value.c_str();
    case TRITONSERVER_PARAMETER_INT:
      return &int_value;
    case TRITONSERVER_PARAMETER_BOOL:
      return &bool_value;
    case TRITONSERVER_PARAMETER_DOUBLE:
      return &double_value;
    case TRITONSERVER_PARAMETER_BYTES:
      return string_value.data();
  }
  return nullptr;
}

InferenceRequest::InferenceRequest(Model* model, std::shared_ptr<ResponseChannel> channel)
    : model(model), channel(std::move(channel)), tracker_(model->tracker) {
  tracker_->AddRequest(this);
}

InferenceRequest::~InferenceRequest() {
  tracker_->RemoveRequest(this);
}

const RequestInput* InferenceRequest::FindInput(const char* name) const {
  for (const auto& input : inputs) {
    if (input.name == name) return &input;
  }
  return nullptr;
}

}  // namespace inflight::server
