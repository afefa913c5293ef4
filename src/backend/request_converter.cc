#include "backend/request_converter.h"

#include <optional>
#include <string>
#include <utility>

#include "executor/sampling/word_list.h"

namespace inflight::backend {
namespace {

const char* TypeName(TRITONSERVER_DataType t) {
  return DataTypeName(t);
}

// Reads the tensors of one request, knowing its batch size. A per-row scalar may come as [B], [B,
// 1] or a single element shared by every row.
class RowReader {
 public:
  RowReader(const TensorMap& inputs, std::int64_t batch) : inputs_(inputs), batch_(batch) {}

  const HostTensor* Find(const char* name) const {
    auto it = inputs_.find(name);
    return it == inputs_.end() ? nullptr : &it->second;
  }

  template <typename T>
  Result<std::optional<T>> Scalar(const char* name, TRITONSERVER_DataType dtype,
                                  std::int64_t row) const {
    const HostTensor* t = Find(name);
    if (t == nullptr) return std::optional<T>();
    RETURN_IF_ERROR(CheckType(*t, dtype));
    const std::int64_t n = t->NumElements();
    if (n == 0) return std::optional<T>();
    if (n != 1 && n != batch_) {
      return InvalidArgument("input '" + std::string(name) + "' has " + std::to_string(n) +
                             " elements; expected 1 or one per batch row (" +
                             std::to_string(batch_) + ")");
    }
    return std::optional<T>(t->As<T>()[n == 1 ? 0 : row]);
  }

  // An integer scalar that may arrive as INT32/INT64/UINT64 (seed is UINT64 in NVIDIA's config).
  Result<std::optional<std::uint64_t>> U64(const char* name, std::int64_t row) const {
    const HostTensor* t = Find(name);
    if (t == nullptr) return std::optional<std::uint64_t>();
    switch (t->dtype) {
      case TRITONSERVER_TYPE_UINT64:
        return Scalar<std::uint64_t>(name, t->dtype, row);
      case TRITONSERVER_TYPE_INT64: {
        ASSIGN_OR_RETURN(auto v, Scalar<std::int64_t>(name, t->dtype, row));
        if (!v) return std::optional<std::uint64_t>();
        return std::optional<std::uint64_t>(static_cast<std::uint64_t>(*v));
      }
      case TRITONSERVER_TYPE_INT32: {
        ASSIGN_OR_RETURN(auto v, Scalar<std::int32_t>(name, t->dtype, row));
        if (!v) return std::optional<std::uint64_t>();
        return std::optional<std::uint64_t>(static_cast<std::uint64_t>(*v));
      }
      default:
        return InvalidArgument("input '" + std::string(name) + "' has datatype " +
                               TypeName(t->dtype) + "; expected UINT64, INT64 or INT32");
    }
  }

  // Row `row` of a [B, ...] tensor (or the whole tensor when the model does not batch).
  template <typename T>
  Result<std::span<const T>> Row(const HostTensor& t, TRITONSERVER_DataType dtype, bool batched,
                                 std::int64_t row) const {
    RETURN_IF_ERROR(CheckType(t, dtype));
    auto all = t.As<T>();
    if (!batched) return all;
    if (t.shape.empty() || t.shape[0] != batch_) {
      return InvalidArgument("input '" + t.name + "' must have " + std::to_string(batch_) +
                             " rows (the batch size of input_ids), got shape " + ShapeString(t));
    }
    const std::size_t per_row = batch_ == 0 ? 0 : all.size() / static_cast<std::size_t>(batch_);
    return all.subspan(static_cast<std::size_t>(row) * per_row, per_row);
  }

  static Status CheckType(const HostTensor& t, TRITONSERVER_DataType dtype) {
    if (t.dtype != dtype) {
      return InvalidArgument("input '" + t.name + "' has datatype " + TypeName(t.dtype) +
                             "; expected " + TypeName(dtype));
    }
    return Status::Ok();
  }

  static std::string ShapeString(const HostTensor& t) {
    std::string s = "[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i > 0) s += ",";
      s += std::to_string(t.shape[i]);
    }
    return s + "]";
  }

 private:
  const TensorMap& inputs_;
  std::int64_t batch_;
};

Result<std::vector<VecTokens>> WordList(const RowReader& r, const char* name, bool batched,
                                        std::int64_t row) {
  const HostTensor* t = r.Find(name);
  if (t == nullptr || t->NumElements() == 0) return std::vector<VecTokens>();
  ASSIGN_OR_RETURN(auto data, r.Row<std::int32_t>(*t, TRITONSERVER_TYPE_INT32, batched, row));
  // NOTE: NVIDIA's layout is [2, N]: row 0 the flat ids, row 1 the cumulative end offsets.
  if (data.size() % 2 != 0) {
    return InvalidArgument("input '" + std::string(name) +
                           "' must have shape [2, N] per request, got " +
                           RowReader::ShapeString(*t));
  }
  const std::size_t n = data.size() / 2;
  return sampling::ParseWordList(data.first(n), data.subspan(n), name);
}

// Inputs of NVIDIA's tensorrt_llm model that ask for features this engine does not serve, each with
// the feature. A request that carries one (with any element) is refused by name rather than run
// without it. Not listed, because NVIDIA's backend also reads them only for features that are off
// here and they change nothing for a decoder-only model: decoder_input_ids / decoder_input_lengths
// (the ensemble always sends one pad id per row), prompt_vocab_size and draft_acceptance_threshold
// (meaningless without a prompt table or draft tokens), beam_search_diversity_rate (beam width 1).
constexpr std::pair<const char*, const char*> kUnservedInputs[] = {
    {"encoder_input_features", "encoder-decoder and multimodal models are not served"},
    {"encoder_output_lengths", "encoder-decoder and multimodal models are not served"},
    {"cross_attention_mask", "encoder-decoder models are not served"},
    {"skip_cross_attn_blocks", "encoder-decoder models are not served"},
    {"draft_input_ids", "speculative decoding with draft tokens is not implemented"},
    {"draft_logits", "speculative decoding with draft tokens is not implemented"},
    {"prompt_embedding_table", "prompt tuning (prompt embedding tables) is not implemented"},
    {"prompt_table_extra_ids", "prompt tuning (prompt embedding tables) is not implemented"},
    {"lora_task_id", "LoRA adapters are not served"},
    {"lora_weights", "LoRA adapters are not served"},
    {"lora_config", "LoRA adapters are not served"},
    {"context_phase_params",
     "disaggregated serving (context/generation phases) is not implemented"},
    {"retention_token_range_starts", "KV cache retention priorities are not implemented"},
    {"retention_token_range_ends", "KV cache retention priorities are not implemented"},
    {"retention_token_range_priorities", "KV cache retention priorities are not implemented"},
    {"retention_token_range_durations_ms", "KV cache retention priorities are not implemented"},
    {"retention_decode_priority", "KV cache retention priorities are not implemented"},
    {"retention_decode_duration_ms", "KV cache retention priorities are not implemented"},
    {"guided_decoding_guide_type", "guided decoding is not implemented"},
    {"guided_decoding_guide", "guided decoding is not implemented"},
    {"lookahead_window_size", "lookahead decoding is not implemented"},
    {"lookahead_ngram_size", "lookahead decoding is not implemented"},
    {"lookahead_verification_set_size", "lookahead decoding is not implemented"},
    {"runtime_top_p_min", "top-p decay is not implemented"},
    {"runtime_top_p_decay", "top-p decay is not implemented"},
    {"runtime_top_p_reset_ids", "top-p decay is not implemented"},
};

Status RefuseUnservedInputs(const RowReader& r) {
  for (const auto& [name, why] : kUnservedInputs) {
    const HostTensor* t = r.Find(name);
    if (t != nullptr && t->NumElements() > 0) {
      return Unsupported("input '" + std::string(name) + "' is not supported: " + why +
                         " (send the request without it)");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ConvertedRequest> ConvertRequest(const TensorMap& inputs, const ModelSettings& settings) {
  const bool batched = settings.max_batch_size > 0;
  auto ids_it = inputs.find("input_ids");
  if (ids_it == inputs.end()) return InvalidArgument("input 'input_ids' is required");
  const HostTensor& ids = ids_it->second;
  RETURN_IF_ERROR(RowReader::CheckType(ids, TRITONSERVER_TYPE_INT32));
  const std::int64_t batch = batched ? (ids.shape.empty() ? 0 : ids.shape[0]) : 1;
  if (batch < 1) return InvalidArgument("input 'input_ids' has an empty batch dimension");
  if (batch > 1 && !settings.decoupled) {
    return InvalidArgument(
        "Batch size > 1 requires the tensorrt_llm backend to be using decoupled transaction "
        "policy");
  }
  RowReader r(inputs, batch);
  if (r.Find("input_lengths") == nullptr)
    return InvalidArgument("input 'input_lengths' is required");
  if (r.Find("request_output_len") == nullptr) {
    return InvalidArgument("input 'request_output_len' is required");
  }
  RETURN_IF_ERROR(RefuseUnservedInputs(r));

  ConvertedRequest out;
  ASSIGN_OR_RETURN(auto streaming, r.Scalar<bool>("streaming", TRITONSERVER_TYPE_BOOL, 0));
  out.streaming = streaming.value_or(false);
  if (out.streaming && !settings.decoupled) {
    return InvalidArgument(
        "Streaming is only supported if model is deployed using decoupled mode.");
  }
  ASSIGN_OR_RETURN(auto stop, r.Scalar<bool>("stop", TRITONSERVER_TYPE_BOOL, 0));
  out.stop = stop.value_or(false);
  ASSIGN_OR_RETURN(auto perf, r.Scalar<bool>("return_perf_metrics", TRITONSERVER_TYPE_BOOL, 0));
  out.return_perf_metrics = perf.value_or(false);

  for (std::int64_t b = 0; b < batch; ++b) {
    Request req;
    req.streaming = out.streaming;
    ASSIGN_OR_RETURN(auto tokens, r.Row<std::int32_t>(ids, TRITONSERVER_TYPE_INT32, batched, b));
    ASSIGN_OR_RETURN(auto len, r.Scalar<std::int32_t>("input_lengths", TRITONSERVER_TYPE_INT32, b));
    const std::int64_t n = len.value_or(static_cast<std::int32_t>(tokens.size()));
    if (n < 0 || n > static_cast<std::int64_t>(tokens.size())) {
      return InvalidArgument("input_lengths " + std::to_string(n) + " of batch row " +
                             std::to_string(b) + " is outside [0, " +
                             std::to_string(tokens.size()) + "] (the row length of input_ids)");
    }
    req.input_token_ids.assign(tokens.begin(), tokens.begin() + n);
    ASSIGN_OR_RETURN(auto max_tokens,
                     r.Scalar<std::int32_t>("request_output_len", TRITONSERVER_TYPE_INT32, b));
    req.max_tokens = max_tokens.value_or(0);
    ASSIGN_OR_RETURN(req.end_id, r.Scalar<std::int32_t>("end_id", TRITONSERVER_TYPE_INT32, b));
    ASSIGN_OR_RETURN(req.pad_id, r.Scalar<std::int32_t>("pad_id", TRITONSERVER_TYPE_INT32, b));
    // NOTE: clients send -1 for "no end token"; the executor's unset means the same.
    if (req.end_id && *req.end_id < 0) req.end_id.reset();
    if (req.pad_id && *req.pad_id < 0) req.pad_id.reset();

    SamplingConfig& s = req.sampling_config;
    ASSIGN_OR_RETURN(auto beam, r.Scalar<std::int32_t>("beam_width", TRITONSERVER_TYPE_INT32, b));
    s.beam_width = beam.value_or(1);
    ASSIGN_OR_RETURN(s.top_k, r.Scalar<std::int32_t>("runtime_top_k", TRITONSERVER_TYPE_INT32, b));
    ASSIGN_OR_RETURN(auto top_p, r.Scalar<float>("runtime_top_p", TRITONSERVER_TYPE_FP32, b));
    if (top_p && *top_p > 0.0f) s.top_p = top_p;  // NVIDIA: <= 0 means unset
    ASSIGN_OR_RETURN(s.temperature, r.Scalar<float>("temperature", TRITONSERVER_TYPE_FP32, b));
    ASSIGN_OR_RETURN(s.repetition_penalty,
                     r.Scalar<float>("repetition_penalty", TRITONSERVER_TYPE_FP32, b));
    ASSIGN_OR_RETURN(s.presence_penalty,
                     r.Scalar<float>("presence_penalty", TRITONSERVER_TYPE_FP32, b));
    ASSIGN_OR_RETURN(s.frequency_penalty,
                     r.Scalar<float>("frequency_penalty", TRITONSERVER_TYPE_FP32, b));
    ASSIGN_OR_RETURN(s.min_tokens,
                     r.Scalar<std::int32_t>("min_tokens", TRITONSERVER_TYPE_INT32, b));
    ASSIGN_OR_RETURN(s.length_penalty, r.Scalar<float>("len_penalty", TRITONSERVER_TYPE_FP32, b));
    ASSIGN_OR_RETURN(s.early_stopping, r.Scalar<bool>("early_stopping", TRITONSERVER_TYPE_BOOL, b));
    ASSIGN_OR_RETURN(s.seed, r.U64("seed", b));
    if (!s.seed) {
      ASSIGN_OR_RETURN(s.seed, r.U64("random_seed", b));
    }
    ASSIGN_OR_RETURN(auto nrs,
                     r.Scalar<std::int32_t>("num_return_sequences", TRITONSERVER_TYPE_INT32, b));
    req.num_return_sequences = nrs.value_or(1);

    OutputConfig& o = req.output_config;
    ASSIGN_OR_RETURN(auto lp, r.Scalar<bool>("return_log_probs", TRITONSERVER_TYPE_BOOL, b));
    o.return_log_probs = lp.value_or(false);
    ASSIGN_OR_RETURN(auto cl, r.Scalar<bool>("return_context_logits", TRITONSERVER_TYPE_BOOL, b));
    o.return_context_logits = cl.value_or(false);
    ASSIGN_OR_RETURN(auto gl,
                     r.Scalar<bool>("return_generation_logits", TRITONSERVER_TYPE_BOOL, b));
    o.return_generation_logits = gl.value_or(false);
    ASSIGN_OR_RETURN(auto ex, r.Scalar<bool>("exclude_input_in_output", TRITONSERVER_TYPE_BOOL, b));
    o.exclude_input_from_output = ex.value_or(settings.exclude_input_in_output);

    ASSIGN_OR_RETURN(req.stop_words, WordList(r, "stop_words_list", batched, b));
    ASSIGN_OR_RETURN(req.bad_words, WordList(r, "bad_words_list", batched, b));
    if (const HostTensor* bias = r.Find("embedding_bias"); bias && bias->NumElements() > 0) {
      ASSIGN_OR_RETURN(auto v, r.Row<float>(*bias, TRITONSERVER_TYPE_FP32, batched, b));
      // NOTE: NVIDIA's preprocessing sends an empty [1, 0] bias when no bias words are given.
      if (!v.empty()) req.embedding_bias = std::vector<float>(v.begin(), v.end());
    }
    out.rows.push_back(std::move(req));
  }
  return out;
}

}  // namespace inflight::backend
