// The largest |x| of an activation matrix, for calibration (model/activation_amax.h): the CUDA twin
// of ActivationAmax::Observe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// *amax_bits = max(*amax_bits, bits of |x[r * stride + c]|) over rows x cols (fp16 / bf16), the
// bits of a non-negative float compared as unsigned: the order of the values, with NaN above inf,
// so one NaN leaves a NaN. amax_bits: device, 0 (the bits of 0.0f) before the first fold.
cudaError_t FoldAbsMax(unsigned* amax_bits, const void* x, std::int64_t rows, std::int64_t cols,
                       std::int64_t stride, DType dtype, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
