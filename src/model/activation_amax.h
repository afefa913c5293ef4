// Calibration of static FP8 scales (inflight-build --calib_dataset): the largest |x| the float
// engine's forward pass produced at each point of a layer where an FP8 engine quantizes: the inputs
// of its four linears, and K and V as they are written to the cache (after RoPE and qk-norm).
// The CPU transformer fills it when a runner is created with RunnerOptions::observe_amax;
// model/static_fp8_scales.h turns it into the engine's input and KV cache scales.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace inflight::model {

enum class AmaxPoint : std::uint8_t {
  kQkvInput,      // the attention norm's output
  kAttnOutInput,  // attention's output, before the output projection
  kMlpInput,      // the MLP norm's output (gate/up, or GPT-2's fc)
  kDownInput,     // the activation's output (SwiGLU / gelu), before the down projection
  kKey,           // K as cached
  kValue,         // V as cached
};
inline constexpr int kNumAmaxPoints = 6;

struct ActivationAmax {
  // [engine layer][AmaxPoint]; NaN once a non-finite value was seen there.
  std::vector<std::array<float, kNumAmaxPoints>> layers;
  std::int64_t samples = 0, tokens = 0;  // what produced them
  std::string source;                    // the calibration data, for config.json

  float at(std::int64_t layer, AmaxPoint p) const {
    return layers[static_cast<std::size_t>(layer)][static_cast<std::size_t>(p)];
  }
  // Folds `rows` rows of `cols` values (row r at x + r * stride) into layer `layer`'s point `p`.
  void Observe(std::int64_t layer, AmaxPoint p, const float* x, std::int64_t rows,
               std::int64_t cols, std::int64_t stride) {
    float& m = layers[static_cast<std::size_t>(layer)][static_cast<std::size_t>(p)];
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * stride;
      for (std::int64_t c = 0; c < cols; ++c) {
        const float a = std::fabs(row[c]);
        if (!std::isfinite(a)) {
          m = std::nanf("");
          return;
        }
        if (a > m) m = a;  // NOTE: false once m is NaN, so NaN stays
      }
    }
  }
};

}  // namespace inflight::model
