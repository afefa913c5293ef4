// What a TRITONBACKEND_Request, _Input, _Response, _Output and _ResponseFactory handle points to.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/c_api_objects.h"
#include "server/response_channel.h"
#include "server/server_api.h"

namespace inflight::server {

class Model;

struct RequestInput {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  uint64_t byte_size = 0;
  std::shared_ptr<const Tensor> tensor;  // owns the bytes the buffers point into
  struct Buffer {
    const char* data = nullptr;
    uint64_t byte_size = 0;
    TRITONSERVER_BufferAttributes attributes;
  };
  std::vector<Buffer> buffers;
};

struct RequestParameter {
  std::string key;
  TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
  std::string string_value;
  int64_t int_value = 0;
  bool bool_value = false;
  double double_value = 0.0;
  // What TRITONBACKEND_RequestParameter hands out: a C string for STRING, else a pointer to the
  // value.
  const void* ValuePointer() const;
};

class InferenceRequest {
 public:
  InferenceRequest(Model* model, std::shared_ptr<ResponseChannel> channel);
  ~InferenceRequest();  // unregisters from the model's tracker
  InferenceRequest(const InferenceRequest&) = delete;
  InferenceRequest& operator=(const InferenceRequest&) = delete;

  Model* model;
  std::shared_ptr<ResponseChannel> channel;
  std::string id;
  uint64_t correlation_id = 0;
  std::string correlation_id_string;
  uint32_t flags = 0;
  uint64_t timeout_us = 0;
  std::vector<RequestInput> inputs;
  std::vector<std::string> requested_outputs;  // what TRITONBACKEND_RequestOutputName lists
  std::vector<RequestParameter> parameters;
  int64_t batch_size = 1;  // first dim when the model batches, else 1
  uint64_t queue_start_ns = 0;

  const RequestInput* FindInput(const char* name) const;

 private:
  std::shared_ptr<RequestTracker> tracker_;
};

struct ResponseOutput {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<char> buffer;
  bool buffer_allocated = false;
  TRITONSERVER_BufferAttributes attributes;
};

class BackendResponse {
 public:
  explicit BackendResponse(std::shared_ptr<ResponseChannel> channel)
      : channel(std::move(channel)) {}
  std::shared_ptr<ResponseChannel> channel;
  std::vector<std::unique_ptr<ResponseOutput>> outputs;
  std::map<std::string, ParameterValue> parameters;
};

class ResponseFactory {
 public:
  explicit ResponseFactory(std::shared_ptr<ResponseChannel> channel)
      : channel(std::move(channel)) {}
  std::shared_ptr<ResponseChannel> channel;
};

uint64_t NowNs();  // steady clock, for statistics

}  // namespace inflight::server
