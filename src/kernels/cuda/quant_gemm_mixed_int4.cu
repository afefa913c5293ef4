// The int4 instantiations of the weight-only quantized GEMM (quant_gemm_mixed_kernel.cuh); one
// kind a file so the 2-core build compiles them side by side.
#include "kernels/cuda/quant_gemm_mixed_instances.cuh"

namespace inflight::kernels::cuda {

INFLIGHT_QUANT_MIXED_GEMM_INSTANCES(QuantWeightKind::kInt4)

}  // namespace inflight::kernels::cuda
