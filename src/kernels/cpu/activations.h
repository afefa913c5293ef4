// MLP activations: SwiGLU over a fused gate_up output (Llama family), gelu_new (GPT-2).
#pragma once

#include <cstdint>

namespace inflight::kernels::cpu {

// gate_up: [num_tokens, 2 * inter], each row = [gate (inter) | up (inter)]; out: [num_tokens,
// inter]. out[t, i] = silu(gate[t, i]) * up[t, i], silu(g) = g / (1 + exp(-g)).
void SwiGlu(float* out, const float* gate_up, std::int64_t num_tokens, std::int64_t inter);

// out[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for i in [0, n) (HF's
// NewGELUActivation). out may alias x.
void GeluNew(float* out, const float* x, std::int64_t n);

}  // namespace inflight::kernels::cpu
