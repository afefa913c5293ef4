// SampleRows (sampling.h): the logits processors rewrite the row in place, then the shared
// selection code (sampling_select.cuh) picks the token and its log-probability.
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_select.cuh"

namespace inflight::kernels::cuda {
namespace {

using namespace sampling_detail;  // NOLINT(build/namespaces): this file's own building blocks

static_assert(kSampledNotFinite == kRowNotFinite && kSampledAllBanned == kRowAllBanned);

struct RowLoad {
  const float* row;  // NOTE: written earlier by this block, so plain loads (not the read-only path)
  __device__ float operator()(int i) const { return row[i]; }
};

// sampling::ApplyLogitsProcessors on one row, in place, with the same float operations in the same
// order per token (explicit _rn intrinsics: nvcc must not fuse a multiply and a subtract into one
// FMA, which the host does not do). Ends with the block synchronised.
__device__ void ApplyLogitsProcessors(float* row, int vocab, const SamplingParams& p,
                                      const std::int32_t* lists) {
  const float* bias = p.embedding_bias;
  const bool temper = p.temperature > 0.0f && p.temperature != 1.0f;
  if (bias != nullptr || temper) {
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      float l = row[i];
      if (bias != nullptr) l = __fadd_rn(l, bias[i]);
      if (temper) l = __fdiv_rn(l, p.temperature);
      row[i] = l;
    }
    __syncthreads();
  }
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool presence = p.presence_penalty != 0.0f;
  const bool frequency = p.frequency_penalty != 0.0f;
  if (repetition || presence || frequency) {
    // The listed tokens are distinct: one thread owns each, so its stages apply in order.
    const std::int32_t* pairs = lists + p.penalty_offset;
    for (int j = threadIdx.x; j < p.num_penalty_tokens; j += kThreads) {
      const int t = pairs[2 * j];
      const int generated = pairs[2 * j + 1];
      if (t < 0 || t >= vocab) continue;
      float l = row[t];
      if (repetition) {
        l = l > 0.0f ? __fdiv_rn(l, p.repetition_penalty) : __fmul_rn(l, p.repetition_penalty);
      }
      if (generated > 0) {
        if (presence) l = __fsub_rn(l, p.presence_penalty);
        if (frequency) {
          l = __fsub_rn(l, __fmul_rn(__int2float_rn(generated), p.frequency_penalty));
        }
      }
      row[t] = l;
    }
    __syncthreads();
  }
  if (p.num_banned > 0) {
    const std::int32_t* banned = lists + p.ban_offset;
    for (int j = threadIdx.x; j < p.num_banned; j += kThreads) {
      const int t = banned[j];
      if (t >= 0 && t < vocab) row[t] = -INFINITY;
    }
    __syncthreads();
  }
}

// Grid: (num_rows), Block: (kThreads).
__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(std::int32_t* out_ids, float* out_log_probs, float* logits, int vocab,
                     std::int64_t row_stride, const SamplingParams* params,
                     const std::int32_t* lists, MassScale scale) {
  const int r = blockIdx.x;
  float* row = logits + r * row_stride;
  const SamplingParams p = params[r];
  ApplyLogitsProcessors(row, vocab, p, lists);
  RowChoice c;
  c.greedy = p.greedy != 0;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.uniform = p.uniform;
  c.normalize_log_prob = p.normalize_log_prob != 0;
  SampleRow(RowLoad{row}, vocab, c, scale, out_ids + r,
            out_log_probs != nullptr ? out_log_probs + r : nullptr);
}

}  // namespace

cudaError_t SampleRows(std::int32_t* out_ids, float* out_log_probs, float* logits,
                       std::int64_t num_rows, std::int64_t vocab, std::int64_t row_stride,
                       const SamplingParams* params, const std::int32_t* lists,
                       cudaStream_t stream) {
  if (num_rows < 0 || num_rows > 0x7fffffff || vocab <= 0 || vocab > kMaxVocab ||
      row_stride < vocab || out_ids == nullptr || logits == nullptr || params == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (num_rows == 0) return cudaSuccess;
  SampleRowsKernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      out_ids, out_log_probs, logits, static_cast<int>(vocab), row_stride, params, lists,
      MakeMassScale(vocab));
  return cudaGetLastError();
}

}  // namespace inflight::kernels::cuda
