#include "config/llm_params.h"

#include <spdlog/fmt/fmt.h>

#include <functional>
#include <limits>
#include <utility>

#include "common/logging.h"
#include "config/parameters.h"
#include "config/unknown_parameters.h"

namespace inflight::config {
namespace {

// ---- Numeric ranges, printed the way errors show them: "(0, 1]", ">= 1" ----
struct Range {
  std::optional<double> lo;
  std::optional<double> hi;
  bool lo_open = false;
  bool hi_open = false;

  bool Contains(double v) const {
    if (lo && (lo_open ? v <= *lo : v < *lo)) return false;
    if (hi && (hi_open ? v >= *hi : v > *hi)) return false;
    return true;
  }
  std::string Describe() const {
    if (lo && hi) {
      return fmt::format("in {}{}, {}{}", lo_open ? "(" : "[", *lo, *hi, hi_open ? ")" : "]");
    }
    if (lo) return fmt::format("{} {}", lo_open ? ">" : ">=", *lo);
    if (hi) return fmt::format("{} {}", hi_open ? "<" : "<=", *hi);
    return "any value";
  }
};
Range AtLeast(double lo) {
  return {lo, std::nullopt, false, false};
}
Range Within(double lo, double hi, bool lo_open, bool hi_open) {
  return {lo, hi, lo_open, hi_open};
}

Status OutOfRange(std::string_view key, std::string_view value, const Range& range) {
  return InvalidArgument(
      fmt::format("{} {} is out of range: must be {}", key, value, range.Describe()));
}

// ---- The table: one row per parameter; `apply` parses, validates and stores one value ----
using Apply = std::function<Status(std::string_view key, std::string_view value, LlmParams&)>;

struct ParamSpec {
  std::string_view name;
  std::string_view default_text;  // named in the "using its default" log line
  Apply apply;
  bool required = false;
};

template <typename T>
Result<T> ParseIntInRange(std::string_view key, std::string_view value, const Range& range) {
  ASSIGN_OR_RETURN(int64_t v, ParseIntValue(key, value));
  if (!range.Contains(static_cast<double>(v))) return OutOfRange(key, value, range);
  if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
    return OutOfRange(key, value,
                      Within(static_cast<double>(std::numeric_limits<T>::min()),
                             static_cast<double>(std::numeric_limits<T>::max()), false, false));
  }
  return static_cast<T>(v);
}

template <typename T>
Apply Int(T LlmParams::*field, Range range) {
  return [field, range](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    ASSIGN_OR_RETURN(p.*field, ParseIntInRange<T>(key, value, range));
    return Status::Ok();
  };
}

template <typename T>
Apply Int(std::optional<T> LlmParams::*field, Range range) {
  return [field, range](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    ASSIGN_OR_RETURN(p.*field, ParseIntInRange<T>(key, value, range));
    return Status::Ok();
  };
}

Result<double> ParseFloatInRange(std::string_view key, std::string_view value, const Range& range) {
  ASSIGN_OR_RETURN(double v, ParseFloatValue(key, value));
  if (!range.Contains(v)) return OutOfRange(key, value, range);
  return v;
}

Apply Float(double LlmParams::*field, Range range) {
  return [field, range](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    ASSIGN_OR_RETURN(p.*field, ParseFloatInRange(key, value, range));
    return Status::Ok();
  };
}

Apply Float(std::optional<double> LlmParams::*field, Range range) {
  return [field, range](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    ASSIGN_OR_RETURN(p.*field, ParseFloatInRange(key, value, range));
    return Status::Ok();
  };
}

Apply Bool(bool LlmParams::*field) {
  return [field](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    ASSIGN_OR_RETURN(p.*field, ParseBoolValue(key, value));
    return Status::Ok();
  };
}

// "auto" leaves the field unset; anything else is a boolean as Bool reads it (True, false, 1...).
Apply AutoBool(std::optional<bool> LlmParams::*field) {
  return [field](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    if (value == "auto") {
      p.*field = std::nullopt;
      return Status::Ok();
    }
    Result<bool> parsed = ParseBoolValue(key, value);
    if (!parsed.ok()) {
      return InvalidArgument(fmt::format("{} \"{}\" is not one of: auto, true, false", key, value));
    }
    p.*field = *parsed;
    return Status::Ok();
  };
}

Apply String(std::string LlmParams::*field) {
  return [field](std::string_view, std::string_view value, LlmParams& p) -> Status {
    p.*field = std::string(value);
    return Status::Ok();
  };
}

// Accepted spellings map to values; several spellings may share a value (V1 and v1).
template <typename E>
using Choices = std::vector<std::pair<std::string_view, E>>;
using ChoiceError = std::string (*)(std::string_view key, std::string_view value,
                                    const std::vector<std::string_view>& accepted);

std::string NotOneOf(std::string_view key, std::string_view value,
                     const std::vector<std::string_view>& accepted) {
  return fmt::format("{} \"{}\" is not one of: {}", key, value, fmt::join(accepted, ", "));
}

// NVIDIA's wording, which its CI greps for ("Invalid gpt_model_type").
std::string InvalidGptModelType(std::string_view, std::string_view value,
                                const std::vector<std::string_view>&) {
  return fmt::format(
      "Invalid gpt_model_type \"{}\". Must be v1/inflight_batching/inflight_fused_batching.",
      value);
}

template <typename E>
Apply Choice(E LlmParams::*field, Choices<E> choices, ChoiceError error = NotOneOf) {
  return [field, choices, error](std::string_view key, std::string_view value,
                                 LlmParams& p) -> Status {
    for (const auto& [text, v] : choices) {
      if (text == value) {
        p.*field = v;
        return Status::Ok();
      }
    }
    std::vector<std::string_view> accepted;
    for (const auto& [text, v] : choices) accepted.push_back(text);
    return InvalidArgument(error(key, value, accepted));
  };
}

Apply IntList(std::optional<std::vector<int32_t>> LlmParams::*field, Range each) {
  return [field, each](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    ASSIGN_OR_RETURN(auto list, ParseCsvInts(key, value));
    for (int32_t v : list) {
      if (!each.Contains(v)) return OutOfRange(key, std::to_string(v), each);
    }
    p.*field = std::move(list);
    return Status::Ok();
  };
}

using Groups = std::optional<std::vector<std::vector<int32_t>>>;

Apply IntGroups(Groups LlmParams::*field) {
  return [field](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    ASSIGN_OR_RETURN(p.*field, ParseCsvIntGroups(key, value));
    return Status::Ok();
  };
}

Apply DeviceGroups(Groups LlmParams::*field) {
  return [field](std::string_view key, std::string_view value, LlmParams& p) -> Status {
    ASSIGN_OR_RETURN(p.*field, ParseDeviceIdGroups(key, value));
    return Status::Ok();
  };
}

const std::vector<ParamSpec>& Table() {
  using P = LlmParams;
  using B = BatchingType;
  using D = DecodingMode;
  static const std::vector<ParamSpec> table = {
      {"gpt_model_type", "required",
       Choice(&P::batching_type,
              Choices<B>{{"V1", B::kV1},
                         {"v1", B::kV1},
                         {"inflight_batching", B::kInflightFusedBatching},
                         {"inflight_fused_batching", B::kInflightFusedBatching}},
              InvalidGptModelType),
       /*required=*/true},
      {"max_beam_width", "1", Int(&P::max_beam_width, AtLeast(1))},
      {"gpt_model_path", "none", String(&P::gpt_model_path)},
      {"encoder_model_path", "none", String(&P::encoder_model_path)},
      {"max_tokens_in_paged_kv_cache", "from kv_cache_free_gpu_mem_fraction",
       Int(&P::max_tokens_in_paged_kv_cache, AtLeast(1))},
      {"max_attention_window_size", "the maximum sequence length",
       IntList(&P::max_attention_window_size, AtLeast(1))},
      {"sink_token_length", "none", Int(&P::sink_token_length, AtLeast(0))},
      {"batch_scheduler_policy", "guaranteed_no_evict",
       Choice(
           &P::batch_scheduler_policy,
           Choices<SchedulerPolicy>{{"max_utilization", SchedulerPolicy::kMaxUtilization},
                                    {"guaranteed_no_evict", SchedulerPolicy::kGuaranteedNoEvict}})},
      {"kv_cache_free_gpu_mem_fraction", "0.9",
       Float(&P::kv_cache_free_gpu_mem_fraction, Within(0, 1, true, false))},
      {"cross_kv_cache_fraction", "none",
       Float(&P::cross_kv_cache_fraction, Within(0, 1, true, true))},
      {"kv_cache_host_memory_bytes", "0", Int(&P::kv_cache_host_memory_bytes, AtLeast(0))},
      {"kv_cache_onboard_blocks", "true", Bool(&P::kv_cache_onboard_blocks)},
      {"enable_trt_overlap", "false", Bool(&P::enable_trt_overlap)},
      {"exclude_input_in_output", "false", Bool(&P::exclude_input_in_output)},
      {"cancellation_check_period_ms", "100", Int(&P::cancellation_check_period_ms, AtLeast(1))},
      {"stats_check_period_ms", "100", Int(&P::stats_check_period_ms, AtLeast(1))},
      {"iter_stats_max_iterations", "1000", Int(&P::iter_stats_max_iterations, AtLeast(0))},
      {"request_stats_max_iterations", "0", Int(&P::request_stats_max_iterations, AtLeast(0))},
      {"enable_kv_cache_reuse", "true", Bool(&P::enable_kv_cache_reuse)},
      {"normalize_log_probs", "true", Bool(&P::normalize_log_probs)},
      {"enable_chunked_context", "false", Bool(&P::enable_chunked_context)},
      {"gpu_device_ids", "all visible devices", DeviceGroups(&P::gpu_device_ids)},
      {"participant_ids", "none", DeviceGroups(&P::participant_ids)},
      {"num_nodes", "unset (the hosts mpirun runs the ranks on)", Int(&P::num_nodes, AtLeast(1))},
      {"lora_cache_optimal_adapter_size", "8",
       Int(&P::lora_cache_optimal_adapter_size, AtLeast(1))},
      {"lora_cache_max_adapter_size", "64", Int(&P::lora_cache_max_adapter_size, AtLeast(1))},
      {"lora_cache_gpu_memory_fraction", "0.05",
       Float(&P::lora_cache_gpu_memory_fraction, Within(0, 1, true, false))},
      {"lora_cache_host_memory_bytes", "1073741824",
       Int(&P::lora_cache_host_memory_bytes, AtLeast(0))},
      {"lora_prefetch_dir", "none", String(&P::lora_prefetch_dir)},
      {"decoding_mode", "auto",
       Choice(&P::decoding_mode, Choices<D>{{"auto", D::kAuto},
                                            {"top_k", D::kTopK},
                                            {"top_p", D::kTopP},
                                            {"top_k_top_p", D::kTopKTopP},
                                            {"beam_search", D::kBeamSearch},
                                            {"medusa", D::kMedusa},
                                            {"redrafter", D::kRedrafter},
                                            {"lookahead", D::kLookahead},
                                            {"eagle", D::kEagle}})},
      {"executor_worker_path", "beside the backend library", String(&P::executor_worker_path)},
      {"lookahead_window_size", "none", Int(&P::lookahead_window_size, AtLeast(1))},
      {"lookahead_ngram_size", "none", Int(&P::lookahead_ngram_size, AtLeast(1))},
      {"lookahead_verification_set_size", "none",
       Int(&P::lookahead_verification_set_size, AtLeast(1))},
      {"medusa_choices", "none", IntGroups(&P::medusa_choices)},
      {"eagle_choices", "none", IntGroups(&P::eagle_choices)},
      {"gpu_weights_percent", "1.0", Float(&P::gpu_weights_percent, Within(0, 1, false, false))},
      {"enable_context_fmha_fp32_acc", "false", Bool(&P::enable_context_fmha_fp32_acc)},
      {"multi_block_mode", "true", Bool(&P::multi_block_mode)},
      {"cuda_graph_mode", "false", Bool(&P::cuda_graph_mode)},
      {"cuda_graph_cache_size", "0", Int(&P::cuda_graph_cache_size, AtLeast(0))},
      {"speculative_decoding_fast_logits", "false", Bool(&P::speculative_decoding_fast_logits)},
      {"tokenizer_dir", "none", String(&P::tokenizer_dir)},
      {"guided_decoding_backend", "off",
       Choice(&P::guided_decoding_backend, Choices<std::string>{{"xgrammar", "xgrammar"}})},
      {"xgrammar_tokenizer_info_path", "none", String(&P::xgrammar_tokenizer_info_path)},
      {"recv_poll_period_ms", "0", Int(&P::recv_poll_period_ms, AtLeast(0))},
      {"FORCE_CPU_ONLY_INPUT_TENSORS", "no", Bool(&P::force_cpu_only_input_tensors)},
      {"device", "auto",
       Choice(&P::device,
              Choices<Device>{
                  {"auto", Device::kAuto}, {"cuda", Device::kCuda}, {"cpu", Device::kCpu}})},
      {"busy_poll", "auto", AutoBool(&P::busy_poll)},
      {"engine_cache_dir", "none", String(&P::engine_cache_dir)},
      {"build_dtype", "the checkpoint's",
       Choice(&P::build_dtype,
              Choices<std::string>{
                  {"float32", "float32"}, {"float16", "float16"}, {"bfloat16", "bfloat16"}})},
      {"build_max_input_len", "min(1024, build_max_seq_len)",
       Int(&P::build_max_input_len, AtLeast(1))},
      {"build_max_seq_len", "min(max_position_embeddings, 2048)",
       Int(&P::build_max_seq_len, AtLeast(1))},
      {"build_max_num_tokens", "8192", Int(&P::build_max_num_tokens, AtLeast(1))},
      {"build_tokens_per_block", "64", Int(&P::build_tokens_per_block, AtLeast(1))},
  };
  return table;
}

// Parameters that ask for a feature this engine does not have: refused by name when set (to a value
// that asks for it), never accepted and ignored. Options of TensorRT-LLM's own runtime that change
// no result here (multi_block_mode, cuda_graph_mode, enable_context_fmha_fp32_acc, the LoRA cache
// sizes, kv_cache_onboard_blocks, enable_trt_overlap) stay accepted: docs/template_keys.md says
// why.
Status RefuseUnservedFeatures(const LlmParams& p) {
  const auto refuse = [](std::string_view key, std::string_view value, std::string_view why) {
    return Unsupported(fmt::format("{} \"{}\" is not supported: {}", key, value, why));
  };
  if (!p.encoder_model_path.empty()) {
    return refuse("encoder_model_path", p.encoder_model_path,
                  "encoder-decoder models are not served; leave encoder_engine_dir unfilled");
  }
  if (p.cross_kv_cache_fraction) {
    return refuse("cross_kv_cache_fraction", fmt::format("{}", *p.cross_kv_cache_fraction),
                  "cross attention (encoder-decoder models) is not served");
  }
  if (!p.lora_prefetch_dir.empty()) {
    return refuse("lora_prefetch_dir", p.lora_prefetch_dir, "LoRA adapters are not served");
  }
  switch (p.decoding_mode) {
    case DecodingMode::kAuto:
    case DecodingMode::kTopK:
    case DecodingMode::kTopP:
    case DecodingMode::kTopKTopP:
      break;
    default:
      return refuse("decoding_mode", DecodingModeName(p.decoding_mode),
                    "accepted: auto, top_k, top_p, top_k_top_p (beam search and speculative "
                    "decoding are not implemented)");
  }
  if (p.medusa_choices) {
    return refuse("medusa_choices", "...", "Medusa speculative decoding is not implemented");
  }
  if (p.eagle_choices) {
    return refuse("eagle_choices", "...", "EAGLE speculative decoding is not implemented");
  }
  if (p.speculative_decoding_fast_logits) {
    return refuse("speculative_decoding_fast_logits", "true",
                  "speculative decoding is not implemented");
  }
  if (p.gpu_weights_percent != 1.0) {
    return refuse("gpu_weights_percent", fmt::format("{}", p.gpu_weights_percent),
                  "weight streaming is not implemented; accepted: 1.0");
  }
  if (!p.guided_decoding_backend.empty()) {
    return refuse("guided_decoding_backend", p.guided_decoding_backend,
                  "guided decoding is not implemented; leave it unfilled");
  }
  return Status::Ok();
}

// Rules that join several keys; run after every key has its value.
Status CheckCombinations(const LlmParams& p) {
  if (p.gpt_model_path.empty() && p.encoder_model_path.empty()) {
    return InvalidArgument(
        "gpt_model_path and encoder_model_path are both empty: set gpt_model_path (template key "
        "engine_dir) to the engine directory");
  }
  if (p.build_tokens_per_block) {
    const int32_t t = *p.build_tokens_per_block;
    if (t > 1024 || (t & (t - 1)) != 0) {
      return InvalidArgument(fmt::format(
          "build_tokens_per_block {} is not a power of two in [1, 1024] (accepted: 1, 2, 4, ..., "
          "1024)",
          t));
    }
  }
  const bool any_lookahead =
      p.lookahead_window_size || p.lookahead_ngram_size || p.lookahead_verification_set_size;
  const bool all_lookahead =
      p.lookahead_window_size && p.lookahead_ngram_size && p.lookahead_verification_set_size;
  if (p.decoding_mode == DecodingMode::kLookahead && !all_lookahead) {
    return InvalidArgument(
        "decoding_mode \"lookahead\" requires lookahead_window_size, lookahead_ngram_size and "
        "lookahead_verification_set_size");
  }
  if (p.decoding_mode != DecodingMode::kLookahead && any_lookahead) {
    return InvalidArgument(fmt::format(
        "lookahead_window_size, lookahead_ngram_size and lookahead_verification_set_size are only "
        "used with decoding_mode \"lookahead\", but decoding_mode is \"{}\"",
        DecodingModeName(p.decoding_mode)));
  }
  return Status::Ok();
}

}  // namespace

Result<LlmParams> LlmParams::FromModelConfig(const inference::ModelConfig& config) {
  LlmParams p;
  p.model_name = config.name();
  p.decoupled = config.model_transaction_policy().decoupled();
  if (config.max_batch_size() < 0) {
    return InvalidArgument(
        fmt::format("max_batch_size {} is out of range: must be >= 0", config.max_batch_size()));
  }
  p.max_batch_size = config.max_batch_size();
  if (config.has_dynamic_batching()) {
    p.max_queue_size = config.dynamic_batching().default_queue_policy().max_queue_size();
    p.max_queue_delay_microseconds = config.dynamic_batching().max_queue_delay_microseconds();
  }

  for (const ParamSpec& spec : Table()) {
    const std::string key(spec.name);
    std::optional<std::string> value = GetParameter(config, key, spec.default_text);
    if (!value && spec.required) {
      // Report what was there ("" or the placeholder) with the key's own error text.
      auto it = config.parameters().find(key);
      value = it == config.parameters().end() ? std::string() : it->second.string_value();
    }
    if (value) RETURN_IF_ERROR(spec.apply(spec.name, *value, p));
  }
  WarnUnknownParameters(config, ParameterNames());
  RETURN_IF_ERROR(CheckCombinations(p));
  return p;
}

Status LlmParams::CheckServed() const {
  return RefuseUnservedFeatures(*this);
}

std::vector<std::string> LlmParams::ParameterNames() {
  std::vector<std::string> names;
  for (const ParamSpec& spec : Table()) names.emplace_back(spec.name);
  return names;
}

std::string_view BatchingTypeName(BatchingType type) {
  switch (type) {
    case BatchingType::kV1:
      return "v1";
    case BatchingType::kInflightFusedBatching:
      return "inflight_fused_batching";
  }
  return "unknown";
}

std::string_view SchedulerPolicyName(SchedulerPolicy policy) {
  switch (policy) {
    case SchedulerPolicy::kMaxUtilization:
      return "max_utilization";
    case SchedulerPolicy::kGuaranteedNoEvict:
      return "guaranteed_no_evict";
  }
  return "unknown";
}

std::string_view DecodingModeName(DecodingMode mode) {
  switch (mode) {
    case DecodingMode::kAuto:
      return "auto";
    case DecodingMode::kTopK:
      return "top_k";
    case DecodingMode::kTopP:
      return "top_p";
    case DecodingMode::kTopKTopP:
      return "top_k_top_p";
    case DecodingMode::kBeamSearch:
      return "beam_search";
    case DecodingMode::kMedusa:
      return "medusa";
    case DecodingMode::kRedrafter:
      return "redrafter";
    case DecodingMode::kLookahead:
      return "lookahead";
    case DecodingMode::kEagle:
      return "eagle";
  }
  return "unknown";
}

std::string_view DeviceName(Device device) {
  switch (device) {
    case Device::kAuto:
      return "auto";
    case Device::kCuda:
      return "cuda";
    case Device::kCpu:
      return "cpu";
  }
  return "unknown";
}

}  // namespace inflight::config
