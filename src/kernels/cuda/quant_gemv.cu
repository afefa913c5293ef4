#include "kernels/cuda/quant_gemv.h"

#include <algorithm>

#include "common/env_switch.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_activation_fp8.h"
#include "kernels/cuda/quant_codes.cuh"
#include "kernels/cuda/quant_gemv_kernels.cuh"
#include "kernels/cuda/quant_linear_path.h"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = kQuantGemvThreads;
constexpr int kWarps = kQuantGemvWarps;
constexpr int kUnroll = kQuantGemvUnroll;

// A lane's next kQuantGemvUnroll chunks of a weight row: chunks base, base + 32, ... (zeros past
// the row's `chunks`), all loads issued before any is used.
__device__ __forceinline__ void LoadCodeChunks(const uint4* w_row, std::int64_t base,
                                               std::int64_t chunks, uint4 (&v)[kQuantGemvUnroll]) {
#pragma unroll
  for (int u = 0; u < kQuantGemvUnroll; ++u) {
    const std::int64_t c = base + 32 * u;
    v[u] = c < chunks ? LoadCodesStreaming(w_row + c) : make_uint4(0, 0, 0, 0);
  }
}

template <typename T>
__device__ __forceinline__ void ToFloat8(const uint4& bits, float (&out)[8]) {
  Vec8<T> v;
  v.bits = bits;
#pragma unroll
  for (int e = 0; e < 8; ++e) out[e] = ToFloat(v.e[e]);
}

// One warp per output row, rows strided over the grid; the block first copies the m input rows
// into shared memory. Lane l reads 16-byte code chunks l, l + 32, ... of the row (512 contiguous
// bytes a warp load). A chunk covers kCols columns, i.e. kQ runs of 8 inputs in shared memory; lane
// l visits them starting at a rotation of l so that the quarter-warp reading together hits
// distinct banks (lane l's runs sit kCols * 2 bytes apart, which would put 4 (int4) or 2 (int8,
// fp8) lanes on one bank). kChunkGroups: the chunk lies in one scale group (no g_idx, group_size a
// multiple of kCols or one group), so the scale and zero are applied once per chunk; else per
// column. Grid: (min(ceil(n / kWarps), 16 x SMs)), Block: (kThreads).
template <typename T, QuantWeightKind kKind, int kMaxM, bool kChunkGroups>
__global__ void __launch_bounds__(kThreads) QuantGemvKernel(QuantGemvArgs a) {
  extern __shared__ uint4 sx[];  // [m][k / 8]
  constexpr int kCols = kQuantChunkCols<kKind>;
  constexpr int kQ = kCols / 8;
  constexpr int kRotShift = kQ == 4 ? 1 : 2;
  const std::int64_t m = a.m, k8 = a.k / 8;
  GridDependencyWait();
  GridDependencyLaunchDependents();
  for (std::int64_t i = threadIdx.x; i < m * k8; i += kThreads) {
    const std::int64_t t = i / k8, c = i - t * k8;
    sx[i] = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.x) + t * a.x_stride + c * 8);
  }
  __syncthreads();

  const QuantWeight& w = a.w;
  const int lane = threadIdx.x & 31;
  const std::int64_t chunks = a.k / kCols;
  const std::int64_t row_bytes = kKind == QuantWeightKind::kInt4 ? a.k / 2 : a.k;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
       row < a.n; row += static_cast<std::int64_t>(gridDim.x) * kWarps) {
    const uint4* w_row = reinterpret_cast<const uint4*>(w.codes + row * row_bytes);
    float acc[kMaxM] = {};
    for (std::int64_t base = lane; base < chunks; base += 32 * kUnroll) {
      uint4 v[kUnroll];
      LoadCodeChunks(w_row, base, chunks, v);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const std::int64_t c = base + 32 * u;
        if (c >= chunks) break;
        const std::int64_t col0 = c * kCols;
        float scale = 1.0f, zero = 0.0f;
        if constexpr (kChunkGroups) {
          const std::int64_t g = GroupOf(w, col0);
          scale = ScaleOf(w, row, g);
          zero = ZeroPoint<kKind>(w.zeros, row * w.num_groups + g);
        }
        float part[kMaxM] = {};
#pragma unroll
        for (int r = 0; r < kQ; ++r) {
          const int q = (r + (lane >> kRotShift)) & (kQ - 1);
          const std::int64_t col = col0 + 8 * q;
          float wv[8];
          if constexpr (kChunkGroups) {
            Decode8<kKind>(v[u], q, zero, wv);
          } else {
            Decode8<kKind>(v[u], q, 0.0f, wv);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const std::int64_t g = GroupOf(w, col + e);
              wv[e] =
                  (wv[e] - ZeroPoint<kKind>(w.zeros, row * w.num_groups + g)) * ScaleOf(w, row, g);
            }
          }
#pragma unroll
          for (int t = 0; t < kMaxM; ++t) {
            if (t < m) {
              float xv[8];
              ToFloat8<T>(sx[t * k8 + col / 8], xv);
#pragma unroll
              for (int e = 0; e < 8; ++e) part[t] = fmaf(wv[e], xv[e], part[t]);
            }
          }
        }
#pragma unroll
        for (int t = 0; t < kMaxM; ++t) acc[t] = fmaf(part[t], scale, acc[t]);
      }
    }
#pragma unroll
    for (int t = 0; t < kMaxM; ++t) acc[t] = WarpSum(acc[t]);
    if (lane < m) {
      // Lane t writes token t (a register array indexed by a runtime value would spill).
      float out = 0.0f;
#pragma unroll
      for (int t = 0; t < kMaxM; ++t) {
        if (t == lane) out = acc[t];
      }
      T* y = static_cast<T*>(a.y) + lane * a.y_stride;
      if (a.bias != nullptr) out += ToFloat(static_cast<const T*>(a.bias)[row]);
      if (a.accumulate) out += ToFloat(y[row]);
      y[row] = FromFloat<T>(out);
    }
  }
}

constexpr std::size_t kDefaultSharedBytes = 48 << 10;

int MaxSharedBytes() {
  return CurrentDeviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                static_cast<int>(kDefaultSharedBytes));
}

// The devices whose GEMV kernels all have the device's maximum dynamic shared memory already
// (QuantGemvPrepareDevice).
PreparedDevices g_prepared_devices;

template <typename T, QuantWeightKind kKind, int kMaxM, bool kChunkGroups>
cudaError_t RaiseSharedLimit() {
  return cudaFuncSetAttribute(QuantGemvKernel<T, kKind, kMaxM, kChunkGroups>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, MaxSharedBytes());
}

template <typename T, QuantWeightKind kKind>
cudaError_t RaiseSharedLimits() {
  for (const cudaError_t err :
       {RaiseSharedLimit<T, kKind, 1, true>(), RaiseSharedLimit<T, kKind, 1, false>(),
        RaiseSharedLimit<T, kKind, 8, true>(), RaiseSharedLimit<T, kKind, 8, false>(),
        SetQuantGemvHalfRowSharedLimit<T, kKind>(MaxSharedBytes())}) {
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// The one-row kernel on packed half math (quant_gemv_half.cu) unless INFLIGHT_QUANT_GEMV_HALF=0
// (an A/B switch: the general kernel's fp32 math at one row too).
bool HalfRowKernelEnabled() {
  static const bool enabled = EnvSwitchOn("INFLIGHT_QUANT_GEMV_HALF");
  return enabled;
}

// Blocks an SM at most in the grid (rows beyond it loop in each warp): the general kernel 16, the
// one-row kernel what stays resident; INFLIGHT_QUANT_GEMV_BLOCKS_PER_SM caps both (an A/B switch).
std::int64_t BlocksPerSmFromEnv() {
  static const std::int64_t cap =
      std::max<long long>(0, EnvInteger("INFLIGHT_QUANT_GEMV_BLOCKS_PER_SM", 0));
  return cap;
}

// The chunks of a row each lie in one scale group: the kernels apply scale and zero once a chunk.
bool OneGroupPerChunk(const QuantWeight& w) {
  const std::int64_t cols = QuantColumnsPerChunk(w.kind);
  return w.per_tensor || (w.g_idx == nullptr && (w.group_size == 0 || w.group_size % cols == 0));
}

// Whether the one-row kernel takes these rows (Launch's half_row; its indices are 32-bit).
bool HalfRowTakes(const QuantWeight& w, std::int64_t m, std::int64_t n) {
  return m == 1 && n < (std::int64_t{1} << 31) && OneGroupPerChunk(w) && HalfRowKernelEnabled();
}

template <typename T, QuantWeightKind kKind, int kMaxM, bool kChunkGroups>
cudaError_t Launch(const QuantGemvArgs& args, cudaStream_t stream) {
  const bool half_row = kMaxM == 1 && kChunkGroups && HalfRowTakes(args.w, args.m, args.n);
  const auto smem = static_cast<std::size_t>(args.m * args.k * 2);
  if (smem > kDefaultSharedBytes && !g_prepared_devices.Current()) {
    // NOTE: always the device's maximum, as gemv.cu (several devices, threads). A prepared device
    // needs no call here, which is what lets a CUDA graph capture these launches.
    const cudaError_t err = half_row ? SetQuantGemvHalfRowSharedLimit<T, kKind>(MaxSharedBytes())
                                     : RaiseSharedLimit<T, kKind, kMaxM, kChunkGroups>();
    if (err != cudaSuccess) return err;
  }
  std::int64_t per_sm = BlocksPerSmFromEnv();
  if (per_sm == 0) per_sm = half_row ? QuantGemvHalfRowBlocksPerSm<T, kKind>(smem) : 16;
  const std::int64_t cap =
      static_cast<std::int64_t>(CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, 132)) *
      per_sm;
  if (half_row) {
    // As many rows a warp as the resident grid needs, then the fewest blocks that take them all
    // at that count, so no warp runs a row more than the others.
    const std::int64_t rows_per_warp = CeilDiv(args.n, cap * kWarps);
    const auto blocks = static_cast<unsigned>(CeilDiv(args.n, rows_per_warp * kWarps));
    return LaunchQuantGemvHalfRow<T, kKind>(args, blocks, smem, stream);
  }
  const std::int64_t wanted = CeilDiv(args.n, kWarps);
  const auto blocks = static_cast<unsigned>(wanted < cap ? wanted : cap);
  return LaunchProgrammatic(QuantGemvKernel<T, kKind, kMaxM, kChunkGroups>, dim3(blocks),
                            dim3(kThreads), smem, stream, args);
}

template <typename T, QuantWeightKind kKind>
cudaError_t LaunchKind(const QuantGemvArgs& a, cudaStream_t stream) {
  const bool chunk_groups = OneGroupPerChunk(a.w);
  static_assert(kQuantGemvMaxRows == 8, "instantiate the kernel for every row count taken");
  if (a.m == 1) {
    return chunk_groups ? Launch<T, kKind, 1, true>(a, stream)
                        : Launch<T, kKind, 1, false>(a, stream);
  }
  return chunk_groups ? Launch<T, kKind, 8, true>(a, stream)
                      : Launch<T, kKind, 8, false>(a, stream);
}

}  // namespace

cudaError_t QuantGemvPrepareDevice() {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  for (const auto raise : {RaiseSharedLimits<__half, QuantWeightKind::kFp8E4M3>,
                           RaiseSharedLimits<__half, QuantWeightKind::kInt8>,
                           RaiseSharedLimits<__half, QuantWeightKind::kInt4>,
                           RaiseSharedLimits<__nv_bfloat16, QuantWeightKind::kFp8E4M3>,
                           RaiseSharedLimits<__nv_bfloat16, QuantWeightKind::kInt8>,
                           RaiseSharedLimits<__nv_bfloat16, QuantWeightKind::kInt4>}) {
    if ((err = raise()) != cudaSuccess) return err;
  }
  g_prepared_devices.Mark(device);
  return cudaSuccess;
}

bool QuantGemvSupports(const QuantWeight& w, DType dtype, std::int64_t m, std::int64_t k,
                       const void* x, std::int64_t x_stride) {
  return (dtype == DType::kFloat16 || dtype == DType::kBFloat16) &&
         QuantGemvTakes(w.kind, m, k, MaxSharedBytes()) && x_stride % 8 == 0 && Aligned16(x) &&
         Aligned16(w.codes);
}

cudaError_t QuantGemv(void* y, std::int64_t y_stride, void* x, std::int64_t x_stride,
                      const QuantWeight& w, const void* bias, DType dtype, std::int64_t m,
                      std::int64_t n, std::int64_t k, bool accumulate, cudaStream_t stream) {
  if (!QuantGemvSupports(w, dtype, m, k, x, x_stride)) return cudaErrorNotSupported;
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (w.kind == QuantWeightKind::kFp8E4M3 && !HalfRowTakes(w, m, n)) {
    // The FP8 linear's activation rounding, in place (the one-row kernel does it as it stages).
    const cudaError_t err =
        QuantizeActivationsFp8(x, x_stride, dtype, m, k, w.input_scale, nullptr, nullptr, stream);
    if (err != cudaSuccess) return err;
  }
  const QuantGemvArgs args{y, y_stride, x, x_stride, w, bias, m, n, k, accumulate};
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    switch (w.kind) {
      case QuantWeightKind::kFp8E4M3:
        return LaunchKind<T, QuantWeightKind::kFp8E4M3>(args, stream);
      case QuantWeightKind::kInt8:
        return LaunchKind<T, QuantWeightKind::kInt8>(args, stream);
      case QuantWeightKind::kInt4:
        return LaunchKind<T, QuantWeightKind::kInt4>(args, stream);
    }
  });
  return cudaErrorNotSupported;
}

}  // namespace inflight::kernels::cuda
