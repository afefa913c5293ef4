// The int8 instantiations of the weight-only quantized GEMM (quant_gemm_mixed_kernel.cuh).
#include "kernels/cuda/quant_gemm_mixed_instances.cuh"

namespace inflight::kernels::cuda {

INFLIGHT_QUANT_MIXED_GEMM_INSTANCES(QuantWeightKind::kInt8)

}  // namespace inflight::kernels::cuda
