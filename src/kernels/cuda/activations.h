// MLP activations (SwiGLU, gelu_new); CUDA twin of kernels/cpu/activations.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// gate_up: [num_tokens, 2 * inter], each row [gate | up]; out: [num_tokens, inter]; dtype fp16 or
// bf16. out[t, i] = silu(gate[t, i]) * up[t, i], in fp32.
cudaError_t SwiGlu(void* out, const void* gate_up, DType dtype, std::int64_t num_tokens,
                   std::int64_t inter, cudaStream_t stream);

// out[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for i in [0, n). out may alias x.
cudaError_t GeluNew(void* out, const void* x, DType dtype, std::int64_t n, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
