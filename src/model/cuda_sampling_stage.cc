#include "model/cuda_sampling_stage.h"

#include "kernels/cuda/sampling.h"

namespace inflight::model {

Status CudaSamplingStage::Add(const DeviceSampling& d, cudaStream_t stream) {
  const float* bias = nullptr;
  if (d.embedding_bias) {
    ASSIGN_OR_RETURN(bias, bias_cache_.Get(d.embedding_bias, stream));
  }
  return batch_.Add(d, bias);
}

TokenIdType CudaSamplingStage::SampledToken(std::int32_t id) {
  if (id == kernels::cuda::kSampledNotFinite) return StepOutput::kSampledNotFinite;
  if (id == kernels::cuda::kSampledAllBanned) return StepOutput::kSampledAllBanned;
  return id;
}

}  // namespace inflight::model
