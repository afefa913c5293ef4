// Tensors of the preprocessing and postprocessing models, held on the host. The Triton layer
// converts request inputs into these and these into response outputs; the conversions between
// text and ids work on these only, so they are testable without a Triton core.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace inflight::tokenizer {

struct HostTensor {
  enum class Type { kInt32, kFp32, kString };

  std::string name;
  Type type = Type::kInt32;
  std::vector<int64_t> shape;
  // Exactly one of these holds the elements, row-major, as `type` says.
  std::vector<int32_t> i32;
  std::vector<float> f32;
  std::vector<std::string> str;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// "INT32" / "FP32" / "BYTES": Triton's names, for error messages.
const char* HostTensorTypeName(HostTensor::Type type);
// "[2, 3]"
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace inflight::tokenizer
