// Token selection on the device over the full vocabulary: greedy argmax, and temperature / top-k /
// top-p sampling with the executor sampler's rules (executor/sampling/top_k_top_p.h, sampler.h).
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
//   temperature[r] (default 1): z = logits / temperature; <= 0 means greedy (ArgMax) for that row.
//   top_k[r] (default 0): keep the k largest z, larger z first and equal z by lower id; <= 0 or >=
//     vocab: keep all.
//   top_p[r] (default 1): then keep the smallest most-probable prefix (same order) whose
//     probabilities, renormalised over what top-k kept, add up to >= top_p; <= 0 or >= 1: keep all.
//   uniform[r] in [0, 1) (required): the draw is the first kept id, in ascending id order, at which
//     the cumulative renormalised probability exceeds uniform[r] (inverse CDF, as the CPU sampler).
// Tokens whose probability underflows to zero are never drawn.
cudaError_t SampleTopKTopP(std::int32_t* out_ids, const float* logits, std::int64_t num_rows,
                           std::int64_t vocab, std::int64_t row_stride, const float* temperature,
                           const std::int32_t* top_k, const float* top_p, const float* uniform,
                           cudaStream_t stream);

}  // namespace inflight::kernels::cuda
