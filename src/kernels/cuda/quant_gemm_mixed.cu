#include "kernels/cuda/quant_gemm_mixed.h"

#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_gemm_mixed_kernel.cuh"
#include "kernels/cuda/quant_linear_path.h"

namespace inflight::kernels::cuda {
namespace {

// The devices whose kernels have their shared memory limits raised (QuantMixedGemmPrepareDevice).
PreparedDevices g_prepared_devices;

// Resident blocks an SM of one instantiation, asked of the runtime once (at the first launch, or
// in QuantMixedGemmPrepareDevice, outside any graph capture).
template <typename T, QuantWeightKind kKind, int kTokens>
int CachedBlocksPerSm() {
  static const int per_sm = QuantMixedGemmBlocksPerSm<T, kKind, kTokens>();
  return per_sm;
}

template <typename T, QuantWeightKind kKind>
cudaError_t SetLimits() {
  for (const cudaError_t err :
       {SetQuantMixedGemmSharedLimit<T, kKind, 16>(), SetQuantMixedGemmSharedLimit<T, kKind, 32>(),
        SetQuantMixedGemmSharedLimit<T, kKind, 64>()}) {
    if (err != cudaSuccess) return err;
  }
  CachedBlocksPerSm<T, kKind, 16>();
  CachedBlocksPerSm<T, kKind, 32>();
  CachedBlocksPerSm<T, kKind, 64>();
  return cudaSuccess;
}

// Sums the splits' partials in order (so the result does not depend on which split finished
// first), adds the bias and the old output, rounds once. Grid: (ceil(m * n / 256)), Block: (256).
template <typename T>
__global__ void SumSplitsKernel(MixedGemmArgs args, int splits) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const std::int64_t total = static_cast<std::int64_t>(args.m) * args.n;
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const auto t = static_cast<int>(idx / args.n), o = static_cast<int>(idx % args.n);
  float v = 0.0f;
  for (int z = 0; z < splits; ++z) v += args.partial[z * total + idx];
  if (args.bias != nullptr) v += ToFloat(static_cast<const T*>(args.bias)[o]);
  T* out = static_cast<T*>(args.y) + t * args.y_stride + o;
  if (args.accumulate) v += ToFloat(*out);
  *out = FromFloat<T>(v);
}

template <typename T, QuantWeightKind kKind, int kTokens>
cudaError_t LaunchTiles(MixedGemmArgs args, std::int64_t workspace_bytes, cudaStream_t stream) {
  if (!g_prepared_devices.Current()) {
    const cudaError_t err = SetQuantMixedGemmSharedLimit<T, kKind, kTokens>();
    if (err != cudaSuccess) return err;
  }
  const int per_sm = CachedBlocksPerSm<T, kKind, kTokens>();
  const std::int64_t slots =
      static_cast<std::int64_t>(CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, 132)) *
      per_sm;
  const std::int64_t token_tiles = CeilDiv(args.m, kTokens),
                     row_tiles = CeilDiv(args.n, kMixedRows);
  const std::int64_t k_tiles = CeilDiv(args.k, MixedTiles<kKind, kTokens>::kCols);
  // Split k while the grid would leave resident slots idle, keeping at least 4 k tiles a split
  // and the partials within the workspace.
  std::int64_t splits = std::max<std::int64_t>(1, slots / (token_tiles * row_tiles));
  splits = std::min(splits, std::max<std::int64_t>(1, k_tiles / 4));
  const std::int64_t partial_bytes = std::int64_t{4} * args.m * args.n;
  splits = std::min(splits, std::max<std::int64_t>(1, workspace_bytes / partial_bytes));
  const std::int64_t per_split = CeilDiv(k_tiles, splits);
  splits = CeilDiv(k_tiles, per_split);
  args.k_tiles_per_split = static_cast<int>(per_split);
  const dim3 grid(static_cast<unsigned>(token_tiles), static_cast<unsigned>(row_tiles),
                  static_cast<unsigned>(splits));
  cudaError_t err = LaunchQuantMixedGemm<T, kKind, kTokens>(args, grid, stream);
  if (err != cudaSuccess || splits == 1) return err;
  const auto blocks = static_cast<unsigned>(CeilDiv(std::int64_t{args.m} * args.n, 256));
  return LaunchProgrammatic(SumSplitsKernel<T>, dim3(blocks), dim3(256), 0, stream, args,
                            static_cast<int>(splits));
}

template <typename T, QuantWeightKind kKind>
cudaError_t LaunchKind(const MixedGemmArgs& args, std::int64_t workspace_bytes,
                       cudaStream_t stream) {
  if (args.m <= 16) return LaunchTiles<T, kKind, 16>(args, workspace_bytes, stream);
  if (args.m <= 32) return LaunchTiles<T, kKind, 32>(args, workspace_bytes, stream);
  return LaunchTiles<T, kKind, 64>(args, workspace_bytes, stream);
}

}  // namespace

cudaError_t QuantMixedGemmPrepareDevice() {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  for (const auto set :
       {SetLimits<__half, QuantWeightKind::kInt4>, SetLimits<__half, QuantWeightKind::kInt8>,
        SetLimits<__nv_bfloat16, QuantWeightKind::kInt4>,
        SetLimits<__nv_bfloat16, QuantWeightKind::kInt8>}) {
    if ((err = set()) != cudaSuccess) return err;
  }
  g_prepared_devices.Mark(device);
  return cudaSuccess;
}

bool QuantMixedGemmSupports(const QuantWeight& w, DType dtype, std::int64_t m, std::int64_t k,
                            const void* x, std::int64_t x_stride) {
  return QuantMixedGemmLayoutTakes(w.kind, k, w.group_size, w.per_tensor, w.g_idx != nullptr) &&
         (dtype == DType::kFloat16 || dtype == DType::kBFloat16) && m >= 1 &&
         m < (std::int64_t{1} << 24) && k < (std::int64_t{1} << 30) && Aligned16(x) &&
         x_stride % 8 == 0 && Aligned16(w.codes) && w.scales != nullptr;
}

cudaError_t QuantMixedGemm(void* y, std::int64_t y_stride, const void* x, std::int64_t x_stride,
                           const QuantWeight& w, const void* bias, DType dtype, std::int64_t m,
                           std::int64_t n, std::int64_t k, bool accumulate, void* workspace,
                           std::int64_t workspace_bytes, cudaStream_t stream) {
  if (n <= 0 || n >= (std::int64_t{1} << 24) || y_stride < n || x_stride < k ||
      n * w.num_groups >= (std::int64_t{1} << 31)) {
    return cudaErrorInvalidValue;
  }
  if (!QuantMixedGemmSupports(w, dtype, m, k, x, x_stride)) return cudaErrorNotSupported;
  if (workspace == nullptr) workspace_bytes = 0;
  MixedGemmArgs args{};
  args.y = y;
  args.y_stride = y_stride;
  args.x = x;
  args.x_stride = x_stride;
  args.w = w;
  args.bias = bias;
  args.partial = static_cast<float*>(workspace);
  args.m = static_cast<int>(m);
  args.n = static_cast<int>(n);
  args.k = static_cast<int>(k);
  args.accumulate = accumulate;
  const bool one_group = w.per_tensor || w.group_size == 0;
  args.scale_row_stride = w.per_tensor ? 0 : static_cast<int>(w.num_groups);
  args.group_shift = 31;
  if (!one_group) {
    while ((std::int64_t{1} << args.group_shift) > w.group_size) --args.group_shift;
  }
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    return w.kind == QuantWeightKind::kInt4
               ? LaunchKind<T, QuantWeightKind::kInt4>(args, workspace_bytes, stream)
               : LaunchKind<T, QuantWeightKind::kInt8>(args, workspace_bytes, stream);
  });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda
