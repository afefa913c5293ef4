#include "tokenizer/backend/triton_io.h"

#include <cstring>

namespace inflight::tokenizer::backend {
namespace {

// Copies the input's buffers (there may be several) into one host string.
Result<std::string> InputBytes(TRITONBACKEND_Input* input, const char* name, uint64_t byte_size,
                               uint32_t buffer_count) {
  std::string bytes;
  bytes.reserve(byte_size);
  for (uint32_t i = 0; i < buffer_count; ++i) {
    const void* buffer = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    RETURN_IF_ERROR(FromTritonError(
        TRITONBACKEND_InputBuffer(input, i, &buffer, &size, &memory_type, &memory_type_id)));
    if (memory_type == TRITONSERVER_MEMORY_GPU) {
      return Unsupported(std::string("input ") + name +
                         " is in GPU memory; the tokenizer models read CPU memory only");
    }
    bytes.append(static_cast<const char*>(buffer), size);
  }
  return bytes;
}

// Triton's BYTES layout: each element is a 4-byte little-endian length and then the bytes.
Result<std::vector<std::string>> ParseStrings(const std::string& bytes, const char* name,
                                              int64_t count) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 4) {
      return InvalidArgument(std::string("input ") + name +
                             " BYTES data ends inside a length prefix");
    }
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + pos);
    const uint32_t len = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
    pos += 4;
    if (bytes.size() - pos < len) {
      return InvalidArgument(std::string("input ") + name + " element " +
                             std::to_string(out.size()) + " claims " + std::to_string(len) +
                             " bytes but only " + std::to_string(bytes.size() - pos) + " remain");
    }
    out.emplace_back(bytes.data() + pos, len);
    pos += len;
  }
  if (static_cast<int64_t>(out.size()) != count) {
    return InvalidArgument(std::string("input ") + name + " holds " + std::to_string(out.size()) +
                           " strings but its shape has " + std::to_string(count) + " elements");
  }
  return out;
}

template <typename T>
Status CopyNumbers(const std::string& bytes, const char* name, int64_t count, std::vector<T>* out) {
  if (bytes.size() != static_cast<size_t>(count) * sizeof(T)) {
    return InvalidArgument(std::string("input ") + name + " has " + std::to_string(bytes.size()) +
                           " bytes; its shape needs " + std::to_string(count * sizeof(T)));
  }
  out->resize(static_cast<size_t>(count));
  std::memcpy(out->data(), bytes.data(), bytes.size());
  return Status::Ok();
}

}  // namespace

Result<std::vector<HostTensor>> ReadInputs(TRITONBACKEND_Request* request) {
  uint32_t count = 0;
  RETURN_IF_ERROR(FromTritonError(TRITONBACKEND_RequestInputCount(request, &count)));
  std::vector<HostTensor> inputs;
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    RETURN_IF_ERROR(FromTritonError(TRITONBACKEND_RequestInputByIndex(request, i, &input)));
    const char* name = nullptr;
    TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
    const int64_t* shape = nullptr;
    uint32_t dims = 0, buffer_count = 0;
    uint64_t byte_size = 0;
    RETURN_IF_ERROR(FromTritonError(TRITONBACKEND_InputProperties(
        input, &name, &dtype, &shape, &dims, &byte_size, &buffer_count)));
    HostTensor t;
    t.name = name;
    t.shape.assign(shape, shape + dims);
    ASSIGN_OR_RETURN(std::string bytes, InputBytes(input, name, byte_size, buffer_count));
    if (dtype == TRITONSERVER_TYPE_INT32) {
      t.type = HostTensor::Type::kInt32;
      RETURN_IF_ERROR(CopyNumbers(bytes, name, t.num_elements(), &t.i32));
    } else if (dtype == TRITONSERVER_TYPE_FP32) {
      t.type = HostTensor::Type::kFp32;
      RETURN_IF_ERROR(CopyNumbers(bytes, name, t.num_elements(), &t.f32));
    } else if (dtype == TRITONSERVER_TYPE_BYTES) {
      t.type = HostTensor::Type::kString;
      ASSIGN_OR_RETURN(t.str, ParseStrings(bytes, name, t.num_elements()));
    } else {
      return InvalidArgument(std::string("input ") + name + " has data type " +
                             TRITONSERVER_DataTypeString(dtype) + "; accepted: INT32, FP32, BYTES");
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

Result<std::vector<std::string>> RequestedOutputs(TRITONBACKEND_Request* request) {
  uint32_t count = 0;
  RETURN_IF_ERROR(FromTritonError(TRITONBACKEND_RequestOutputCount(request, &count)));
  std::vector<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    RETURN_IF_ERROR(FromTritonError(TRITONBACKEND_RequestOutputName(request, i, &name)));
    names.emplace_back(name);
  }
  return names;
}

Status WriteOutputs(TRITONBACKEND_Response* response, const std::vector<HostTensor>& outputs) {
  for (const HostTensor& t : outputs) {
    std::string bytes;
    TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INT32;
    switch (t.type) {
      case HostTensor::Type::kInt32:
        bytes.assign(reinterpret_cast<const char*>(t.i32.data()), t.i32.size() * sizeof(int32_t));
        break;
      case HostTensor::Type::kFp32:
        dtype = TRITONSERVER_TYPE_FP32;
        bytes.assign(reinterpret_cast<const char*>(t.f32.data()), t.f32.size() * sizeof(float));
        break;
      case HostTensor::Type::kString:
        dtype = TRITONSERVER_TYPE_BYTES;
        for (const std::string& s : t.str) {
          const auto len = static_cast<uint32_t>(s.size());
          const char prefix[4] = {static_cast<char>(len), static_cast<char>(len >> 8),
                                  static_cast<char>(len >> 16), static_cast<char>(len >> 24)};
          bytes.append(prefix, 4);
          bytes += s;
        }
        break;
    }
    TRITONBACKEND_Output* output = nullptr;
    RETURN_IF_ERROR(FromTritonError(
        TRITONBACKEND_ResponseOutput(response, &output, t.name.c_str(), dtype, t.shape.data(),
                                     static_cast<uint32_t>(t.shape.size()))));
    void* buffer = nullptr;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    RETURN_IF_ERROR(FromTritonError(
        TRITONBACKEND_OutputBuffer(output, &buffer, bytes.size(), &memory_type, &memory_type_id)));
    if (memory_type == TRITONSERVER_MEMORY_GPU) {
      return Unsupported("output " + t.name +
                         " was given GPU memory; the tokenizer models write CPU memory only");
    }
    if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
  }
  return Status::Ok();
}

}  // namespace inflight::tokenizer::backend
