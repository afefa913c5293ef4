#include "kernels/cuda/sampling.h"

#include "kernels/cuda/sampling_row.cuh"

namespace inflight::kernels::cuda {
namespace {

using namespace sampling_detail;  // NOLINT(build/namespaces): this file's own building blocks

// The raw row, optionally scaled by 1 / temperature on every read.
struct ScaledLoad {
  const float* row;
  float inv_temp;
  __device__ float operator()(int i) const { return row[i] * inv_temp; }
};

// Grid: (num_rows), Block: (kThreads).
__global__ void __launch_bounds__(kThreads)
    ArgMaxKernel(std::int32_t* out_ids, const float* logits, int vocab, std::int64_t row_stride) {
  const float* row = logits + blockIdx.x * row_stride;
  Best b{0.0f, -1};
  ForEachId(vocab, ScaledLoad{row, 1.0f}, [&](int i, float v, bool valid) {
    if (valid && !isnan(v)) b = Better(b, Best{v, i});
  });
  b = BlockBest(b);
  if (threadIdx.x == 0) out_ids[blockIdx.x] = b.id < 0 ? 0 : b.id;
}

// Grid: (num_rows), Block: (kThreads). The row is only read.
__global__ void __launch_bounds__(kThreads)
    SampleTopKTopPKernel(std::int32_t* out_ids, const float* logits, int vocab,
                         std::int64_t row_stride, const float* temperature,
                         const std::int32_t* top_k, const float* top_p, const float* uniform,
                         MassScale scale, int max_candidates) {
  const int r = blockIdx.x;
  const float temp = temperature != nullptr ? temperature[r] : 1.0f;
  RowChoice c;
  c.greedy = temp <= 0.0f;
  c.top_k = top_k != nullptr ? top_k[r] : 0;
  c.top_p = top_p != nullptr ? top_p[r] : 1.0f;
  c.uniform = static_cast<double>(uniform[r]);
  c.normalize_log_prob = true;
  const ScaledLoad load{logits + r * row_stride, c.greedy ? 1.0f : 1.0f / temp};
  extern __shared__ __align__(16) unsigned char select_shared[];
  SampleRow(load, vocab, c, scale, select_shared, max_candidates, out_ids + r, nullptr);
}

bool ValidShape(std::int64_t num_rows, std::int64_t vocab, std::int64_t row_stride) {
  return num_rows >= 0 && num_rows <= 0x7fffffff && vocab > 0 && vocab <= kMaxVocab &&
         row_stride >= vocab;
}

}  // namespace

cudaError_t ArgMax(std::int32_t* out_ids, const float* logits, std::int64_t num_rows,
                   std::int64_t vocab, std::int64_t row_stride, cudaStream_t stream) {
  if (!ValidShape(num_rows, vocab, row_stride)) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  ArgMaxKernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      out_ids, logits, static_cast<int>(vocab), row_stride);
  return cudaGetLastError();
}

cudaError_t SampleTopKTopP(std::int32_t* out_ids, const float* logits, std::int64_t num_rows,
                           std::int64_t vocab, std::int64_t row_stride, const float* temperature,
                           const std::int32_t* top_k, const float* top_p, const float* uniform,
                           cudaStream_t stream) {
  if (!ValidShape(num_rows, vocab, row_stride) || uniform == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (num_rows == 0) return cudaSuccess;
  const int max_candidates = MaxCandidatesOnDevice();
  const auto shared_bytes = static_cast<unsigned>(max_candidates) * sizeof(unsigned long long);
  const cudaError_t set =
      cudaFuncSetAttribute(SampleTopKTopPKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(shared_bytes));
  if (set != cudaSuccess) return set;
  SampleTopKTopPKernel<<<static_cast<unsigned>(num_rows), kThreads, shared_bytes, stream>>>(
      out_ids, logits, static_cast<int>(vocab), row_stride, temperature, top_k, top_p, uniform,
      MakeMassScale(vocab), max_candidates);
  return cudaGetLastError();
}

}  // namespace inflight::kernels::cuda
