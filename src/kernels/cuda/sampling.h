// Token selection on the device over the full vocabulary, with the executor sampler's rules
// (executor/sampling/sampler.h, logits_processors.h, top_k_top_p.h).
//
// SampleRows is the whole sampler for one row per block: logits processors (embedding bias ->
// temperature -> repetition -> presence -> frequency -> bans), then greedy argmax or top-k / top-p
// truncation and the inverse-CDF draw, and the chosen token's log-probability. ArgMax and
// SampleTopKTopP are the older, narrower launchers (kept for the kernel benchmarks).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace inflight::kernels::cuda {

// out_ids[r] = argmax over i of logits[r * row_stride + i], i in [0, vocab); the lowest id on ties;
// NaN entries are skipped. logits: device fp32; out_ids: device [num_rows].
cudaError_t ArgMax(std::int32_t* out_ids, const float* logits, std::int64_t num_rows,
                   std::int64_t vocab, std::int64_t row_stride, cudaStream_t stream);

// Per row r (all arrays device memory, [num_rows]; a nullptr array means the default for every
// row):
//   temperature[r] (default 1): z = logits * (1 / temperature); <= 0 means greedy (argmax).
//   top_k[r] (default 0): keep the k largest z, larger z first and equal z by lower id; <= 0 or >=
//     vocab: keep all.
//   top_p[r] (default 1): then keep the smallest most-probable prefix (same order) whose
//     probabilities, renormalised over what top-k kept, add up to >= top_p; <= 0 or >= 1: keep all.
//   uniform[r] in [0, 1) (required): the draw is the first kept id, in ascending id order, at which
//     the cumulative renormalised probability exceeds uniform[r] (inverse CDF, as the CPU sampler).
// The logits are not modified. Tokens whose probability underflows to zero are never drawn. A row
// with a NaN or +inf (after scaling) gives kSampledNotFinite, an all -inf row kSampledAllBanned.
cudaError_t SampleTopKTopP(std::int32_t* out_ids, const float* logits, std::int64_t num_rows,
                           std::int64_t vocab, std::int64_t row_stride, const float* temperature,
                           const std::int32_t* top_k, const float* top_p, const float* uniform,
                           cudaStream_t stream);

// What SampleRows does with one row: the fields of sampling::Sample's config and DecodeContext
// that matter on the device. Plain data, the same layout on host and device; uploaded as is.
struct SamplingParams {
  const float* embedding_bias = nullptr;  // device [vocab] added first; nullptr: none
  double uniform = 0.0;                   // the draw, in [0, 1) (PhiloxUniform)
  float temperature = 1.0f;               // applied when > 0 and != 1, greedy rows included
  float top_p = 0.0f;                     // <= 0 or >= 1: off
  float repetition_penalty = 1.0f;        // 1: off
  float presence_penalty = 0.0f;          // 0: off
  float frequency_penalty = 0.0f;         // 0: off
  std::int32_t top_k = 0;                 // <= 0 or >= vocab: off
  // Into `lists` (SampleRows): num_penalty_tokens pairs (token, times generated), one per distinct
  // token that the penalties touch: prompt ++ generated when repetition_penalty != 1, else only
  // the generated tokens.
  std::int32_t penalty_offset = 0;
  std::int32_t num_penalty_tokens = 0;
  // Into `lists`: num_banned ids set to -inf after the penalties (bad words, min_tokens).
  std::int32_t ban_offset = 0;
  std::int32_t num_banned = 0;
  std::uint8_t greedy = 0;              // argmax of the processed row; top_k, top_p unused
  std::uint8_t normalize_log_prob = 1;  // sampled rows: log-prob in the truncated distribution
};

// SampleRows' out_ids for a row it cannot sample (sampling::Sample's kInternal errors).
inline constexpr std::int32_t kSampledNotFinite = -1;  // a processed logit is NaN or +inf
inline constexpr std::int32_t kSampledAllBanned = -2;  // every processed logit is -inf

// Row r = logits + r * row_stride (vocab fp32 entries, device) with params[r] and the int32 `lists`
// (device; offsets in params are absolute, so several launches may share one list array):
//   1. The row is rewritten in place with the processed logits, in TensorRT-LLM's stage order:
//      l += bias; l /= temperature; repetition (l > 0 ? l / p : l * p); l -= presence (generated
//      tokens); l -= count * frequency; banned ids = -inf. The float operations are those of
//      sampling::ApplyLogitsProcessors, so the processed row equals the host's bit for bit.
//   2. out_ids[r]: greedy: the argmax (lowest id on ties). Otherwise top-k, then top-p over the
//      renormalised top-k distribution, order: larger logit first, then lower id; then the first
//      kept id, in ascending id order, at which the cumulative probability exceeds uniform.
//      kSampledNotFinite / kSampledAllBanned when the processed row cannot be sampled.
//   3. out_log_probs[r] (nullable): greedy: log-softmax of the processed row at the token; sampled:
//      the token's log-probability in the truncated, renormalised distribution when
//      normalize_log_prob, else its log-softmax before truncation. NaN for an error row.
// Probabilities are float exp(z - z_max), summed as fixed-point integers (exact and deterministic;
// a unit is 2^-45 of the largest probability at a 128k vocabulary), so decisions match the host's
// double sums except within float rounding of a boundary. Errors: cudaErrorInvalidValue for bad
// sizes (vocab must be in [1, 2^30]) or a null out_ids, logits or params.
cudaError_t SampleRows(std::int32_t* out_ids, float* out_log_probs, float* logits,
                       std::int64_t num_rows, std::int64_t vocab, std::int64_t row_stride,
                       const SamplingParams* params, const std::int32_t* lists,
                       cudaStream_t stream);

}  // namespace inflight::kernels::cuda
