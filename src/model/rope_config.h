// The rotary position embedding of an engine: which of transformers' RoPE types, and every number
// that type reads. Resolved once at build time (defaults filled, yarn's attention factor computed),
// so the runtime never looks at a Hugging Face config again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "inflight/status.h"

namespace inflight::model {

// transformers' rope_type values that the engine computes (modeling_rope_utils.py,
// ROPE_INIT_FUNCTIONS, transformers 5): "default", "linear", "dynamic", "yarn", "llama3".
enum class RopeType : std::uint8_t { kDefault, kLinear, kDynamic, kYarn, kLlama3 };

const char* RopeTypeName(RopeType type);  // as transformers spells it
std::optional<RopeType> ParseRopeType(std::string_view name);
// "default, linear, dynamic, yarn, llama3": for error messages.
const char* SupportedRopeTypes();

// Fields a type does not use keep their defaults. With head_dim d (the whole head rotates), the
// inverse frequencies are (kernels/cpu/rope.h computes them):
//   default: theta^(-2i/d)
//   linear:  default / factor
//   dynamic: default, with theta grown to theta * (factor * L / L0 - (factor - 1))^(d / (d - 2))
//            for a forward call whose last position is L - 1 when L > L0 (L0 below)
//   yarn:    a ramp between default and default / factor over the dimensions whose wavelength
//            lies between original_max_position_embeddings / beta_fast and / beta_slow rotations
//   llama3:  default, divided by factor for wavelengths above original / low_freq_factor, kept
//            below original / high_freq_factor, interpolated in between
// and cos and sin are multiplied by attention_factor (1 except for yarn).
struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;         // rope_theta, > 0
  double factor = 1.0;            // linear, dynamic, yarn, llama3; > 0
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3; > low_freq_factor
  // llama3 and yarn: the pre-training context. dynamic: L0, the length past which theta grows,
  // which transformers takes from max_position_embeddings (modeling_rope_utils.py,
  // _compute_dynamic_ntk_parameters, transformers 5). > 0 for these types.
  std::int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;  // yarn
  double beta_slow = 1.0;   // yarn
  // yarn: as given (they only enter attention_factor, which is already resolved from them).
  std::optional<double> mscale, mscale_all_dim;
  bool truncate = true;  // yarn: round the correction range to whole dimensions
  // The factor on cos and sin: yarn's attention_factor as given or derived from factor, mscale
  // and mscale_all_dim (YarnAttentionFactor); 1 for every other type.
  double attention_factor = 1.0;
};

// Which of RopeConfig's numbers a type reads (beyond theta and attention_factor): factor for all
// but default; original_max_position_embeddings for llama3, yarn and dynamic; low/high_freq_factor
// for llama3; beta_fast, beta_slow, mscale, mscale_all_dim and truncate for yarn.
bool RopeReadsFactor(RopeType type);
bool RopeReadsOriginalLength(RopeType type);

// transformers 5's yarn attention factor when config.json gives none (modeling_rope_utils.py,
// _compute_yarn_parameters): get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when
// both are given and non-zero, else get_mscale(factor); get_mscale(s, m) = 0.1 m ln(s) + 1 for
// s > 1, else 1.
double YarnAttentionFactor(double factor, std::optional<double> mscale,
                           std::optional<double> mscale_all_dim);

// Checks the numbers the type reads (errors name the field and the value; `where` prefixes
// them). head_dim: the rotated dimension (dynamic needs > 2).
Status ValidateRopeConfig(const RopeConfig& rope, std::int64_t head_dim, const std::string& where);

// One line for logs: "llama3 (theta 500000, factor 8, ...)".
std::string DescribeRope(const RopeConfig& rope);

}  // namespace inflight::model
