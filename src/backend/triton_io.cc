#include "backend/triton_io.h"

#include <cstring>

#include "backend/triton_error.h"

namespace inflight::backend {

Result<TensorMap> ReadInputs(TRITONBACKEND_Request* request) {
  TensorMap map;
  std::uint32_t count = 0;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_RequestInputCount(request, &count));
  for (std::uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_RequestInputByIndex(request, i, &input));
    const char* name = nullptr;
    TRITONSERVER_DataType dtype;
    const std::int64_t* shape = nullptr;
    std::uint32_t dims = 0;
    std::uint64_t byte_size = 0;
    std::uint32_t buffers = 0;
    RETURN_IF_TRITON_ERROR(
        TRITONBACKEND_InputProperties(input, &name, &dtype, &shape, &dims, &byte_size, &buffers));
    HostTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape.assign(shape, shape + dims);
    t.data.resize(byte_size);
    std::size_t offset = 0;
    for (std::uint32_t b = 0; b < buffers; ++b) {
      const void* ptr = nullptr;
      std::uint64_t size = 0;
      TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
      std::int64_t mem_id = 0;
      RETURN_IF_TRITON_ERROR(TRITONBACKEND_InputBuffer(input, b, &ptr, &size, &mem, &mem_id));
      if (mem == TRITONSERVER_MEMORY_GPU) {
        return Unsupported("input '" + t.name +
                           "' is in GPU memory; the backend reads inputs from CPU memory");
      }
      if (offset + size > t.data.size()) {
        return InvalidArgument("input '" + t.name + "' buffers exceed its byte size " +
                               std::to_string(byte_size));
      }
      if (size > 0) std::memcpy(t.data.data() + offset, ptr, size);
      offset += size;
    }
    if (dtype != TRITONSERVER_TYPE_BYTES) {
      const std::uint32_t elem = TRITONSERVER_DataTypeByteSize(dtype);
      if (elem == 0 || static_cast<std::uint64_t>(t.NumElements()) * elem != byte_size) {
        return InvalidArgument("input '" + t.name + "' has " + std::to_string(byte_size) +
                               " bytes, which does not match its shape and datatype " +
                               TRITONSERVER_DataTypeString(dtype));
      }
    }
    map.emplace(t.name, std::move(t));
  }
  return map;
}

Result<std::set<std::string>> RequestedOutputs(TRITONBACKEND_Request* request) {
  std::set<std::string> names;
  std::uint32_t count = 0;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_RequestOutputCount(request, &count));
  for (std::uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_RequestOutputName(request, i, &name));
    names.insert(name);
  }
  return names;
}

Status WriteOutputs(TRITONBACKEND_Response* response, const std::vector<HostTensor>& tensors) {
  for (const HostTensor& t : tensors) {
    TRITONBACKEND_Output* output = nullptr;
    RETURN_IF_TRITON_ERROR(
        TRITONBACKEND_ResponseOutput(response, &output, t.name.c_str(), t.dtype, t.shape.data(),
                                     static_cast<std::uint32_t>(t.shape.size())));
    void* buffer = nullptr;
    TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
    std::int64_t mem_id = 0;
    RETURN_IF_TRITON_ERROR(
        TRITONBACKEND_OutputBuffer(output, &buffer, t.data.size(), &mem, &mem_id));
    if (mem == TRITONSERVER_MEMORY_GPU) {
      return Internal("output '" + t.name +
                      "' was given GPU memory; the backend writes CPU memory");
    }
    if (!t.data.empty()) std::memcpy(buffer, t.data.data(), t.data.size());
  }
  return Status::Ok();
}

std::string RequestIdOf(TRITONBACKEND_Request* request) {
  const char* id = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestId(request, &id);
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    return "";
  }
  return id == nullptr ? "" : id;
}

}  // namespace inflight::backend
