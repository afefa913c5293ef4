#include "kernels/cpu/fp8_activation.h"

#include <algorithm>
#include <cmath>

#include "common/fp8_e4m3.h"

namespace inflight::kernels::cpu {

void QuantizeActivationsFp8(float* x, std::int64_t num_tokens, std::int64_t n, std::int64_t stride,
                            float static_scale) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    float* row = x + t * stride;
    float scale = static_scale;
    if (!(scale > 0.0f)) {
      float amax = 0.0f;
      for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(row[i]));
      scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
    }
    for (std::int64_t i = 0; i < n; ++i)
      row[i] = Fp8E4M3ToFloat(FloatToFp8E4M3(row[i] / scale)) * scale;
  }
}

}  // namespace inflight::kernels::cpu
