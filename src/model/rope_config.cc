#include "model/rope_config.h"

#include <cmath>
#include <cstdio>

namespace inflight::model {
namespace {

struct RopeTypeEntry {
  RopeType type;
  const char* name;
};
constexpr RopeTypeEntry kRopeTypes[] = {{RopeType::kDefault, "default"},
                                        {RopeType::kLinear, "linear"},
                                        {RopeType::kDynamic, "dynamic"},
                                        {RopeType::kYarn, "yarn"},
                                        {RopeType::kLlama3, "llama3"}};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}

// get_mscale of transformers 5's _compute_yarn_parameters.
double GetMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

const char* RopeTypeName(RopeType type) {
  for (const RopeTypeEntry& e : kRopeTypes) {
    if (e.type == type) return e.name;
  }
  return "?";
}

std::optional<RopeType> ParseRopeType(std::string_view name) {
  for (const RopeTypeEntry& e : kRopeTypes) {
    if (name == e.name) return e.type;
  }
  return std::nullopt;
}

bool RopeReadsFactor(RopeType type) {
  return type != RopeType::kDefault;
}

bool RopeReadsOriginalLength(RopeType type) {
  return type == RopeType::kLlama3 || type == RopeType::kYarn || type == RopeType::kDynamic;
}

const char* SupportedRopeTypes() {
  return "default, linear, dynamic, yarn, llama3";
}

double YarnAttentionFactor(double factor, std::optional<double> mscale,
                           std::optional<double> mscale_all_dim) {
  // NOTE: transformers tests `if mscale and mscale_all_dim`, so an explicit 0 counts as absent.
  if (mscale && *mscale != 0.0 && mscale_all_dim && *mscale_all_dim != 0.0) {
    return GetMscale(factor, *mscale) / GetMscale(factor, *mscale_all_dim);
  }
  return GetMscale(factor, 1.0);
}

Status ValidateRopeConfig(const RopeConfig& r, std::int64_t head_dim, const std::string& where) {
  auto bad = [&](const char* field, double value, const char* accepted) {
    return InvalidArgument(where + ": rope " + RopeTypeName(r.type) + " " + field + " " +
                           Num(value) + " is not accepted: " + accepted);
  };
  if (!(r.theta > 0.0) || !std::isfinite(r.theta)) return bad("rope_theta", r.theta, "must be > 0");
  if (!(r.attention_factor > 0.0) || !std::isfinite(r.attention_factor)) {
    return bad("attention_factor", r.attention_factor, "must be > 0");
  }
  if (r.type == RopeType::kDefault) return Status::Ok();
  if (!(r.factor > 0.0) || !std::isfinite(r.factor)) return bad("factor", r.factor, "must be > 0");
  const bool needs_original =
      r.type == RopeType::kLlama3 || r.type == RopeType::kYarn || r.type == RopeType::kDynamic;
  if (needs_original && r.original_max_position_embeddings <= 0) {
    return bad("original_max_position_embeddings",
               static_cast<double>(r.original_max_position_embeddings), "must be > 0");
  }
  if (r.type == RopeType::kLlama3 && !(r.high_freq_factor > r.low_freq_factor)) {
    return InvalidArgument(where + ": rope llama3 high_freq_factor " + Num(r.high_freq_factor) +
                           " must be > low_freq_factor " + Num(r.low_freq_factor));
  }
  if (r.type == RopeType::kLlama3 && !(r.low_freq_factor > 0.0)) {
    return bad("low_freq_factor", r.low_freq_factor, "must be > 0");
  }
  if (r.type == RopeType::kYarn && (!(r.beta_fast > 0.0) || !(r.beta_slow > 0.0))) {
    return bad(r.beta_fast > 0.0 ? "beta_slow" : "beta_fast",
               r.beta_fast > 0.0 ? r.beta_slow : r.beta_fast, "must be > 0");
  }
  if (r.type == RopeType::kDynamic && head_dim <= 2) {
    return bad("head_dim", static_cast<double>(head_dim), "dynamic scaling needs head_dim > 2");
  }
  return Status::Ok();
}

std::string DescribeRope(const RopeConfig& r) {
  std::string s = std::string(RopeTypeName(r.type)) + " (theta " + Num(r.theta);
  switch (r.type) {
    case RopeType::kDefault:
      break;
    case RopeType::kLinear:
      s += ", factor " + Num(r.factor);
      break;
    case RopeType::kDynamic:
      s += ", factor " + Num(r.factor) + ", theta grows past " +
           std::to_string(r.original_max_position_embeddings) + " positions";
      break;
    case RopeType::kYarn:
      s += ", factor " + Num(r.factor) + ", original_max_position_embeddings " +
           std::to_string(r.original_max_position_embeddings) + ", beta_fast " + Num(r.beta_fast) +
           ", beta_slow " + Num(r.beta_slow) + (r.truncate ? "" : ", truncate false") +
           ", attention_factor " + Num(r.attention_factor);
      break;
    case RopeType::kLlama3:
      s += ", factor " + Num(r.factor) + ", low_freq_factor " + Num(r.low_freq_factor) +
           ", high_freq_factor " + Num(r.high_freq_factor) + ", original_max_position_embeddings " +
           std::to_string(r.original_max_position_embeddings);
      break;
  }
  return s + ")";
}

}  // namespace inflight::model
