#include "tokenizer/host_tensor.h"

namespace inflight::tokenizer {

const char* HostTensorTypeName(HostTensor::Type type) {
  switch (type) {
    case HostTensor::Type::kInt32:
      return "INT32";
    case HostTensor::Type::kFp32:
      return "FP32";
    case HostTensor::Type::kString:
      return "BYTES";
  }
  return "?";
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace inflight::tokenizer
