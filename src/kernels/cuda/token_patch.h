// Lookahead (model/model_runner.h, SequenceStep::previous_step_row): a step launched before the
// step ahead of it has completed decodes tokens the host does not know yet, the ids that step
// sampled on the device. This copies them into the step's token ids on the device, after the
// step's upload and before its forward pass reads them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace inflight::kernels::cuda {

// For p in [0, num_patches), with (dst, src) = (patches[2p], patches[2p + 1]):
//   token_ids[dst] = sampled_words[src] if it is in [0, vocab_size), else 0.
// An id out of range is one of SampleRows' error codes (kSampledNotFinite, kSampledAllBanned):
// the step still needs a valid id to embed, and the caller discards that sequence's work.
// token_ids: device int32 (the step's token array); patches: device int32 [2 * num_patches];
// sampled_words: device int32 (the earlier step's SampleRows out_ids). Distinct dst per patch.
// Errors: cudaErrorInvalidValue for num_patches < 0, vocab_size < 1, or a null pointer while
// num_patches > 0. num_patches 0 launches nothing.
cudaError_t PatchTokenIds(std::int32_t* token_ids, const std::int32_t* patches,
                          std::int32_t num_patches, const std::int32_t* sampled_words,
                          std::int32_t vocab_size, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
