#include "kernels/cuda/gemv.h"

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// 16-byte weight loads in flight per lane and weight row: 8 x 16 B x 32 lanes x 8 warps = 32 KiB
// per block, and several blocks per SM, well above the ~25 KiB per SM that covers HBM latency at
// full rate.
constexpr int kUnroll = 8;

struct GemvArgs {
  void* y;
  std::int64_t y_stride;
  const void* x;
  std::int64_t x_stride;
  const void* w;
  const void* bias;
  std::int64_t rows;    // outputs per token: n, or inter for the gated form
  std::int64_t chunks;  // k / 8
  bool accumulate;      // y += (not the gated form)
};

// Weights are read once per call: keep them out of L1 so x and the other blocks' lines stay.
__device__ __forceinline__ uint4 LoadStreaming(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

template <typename T>
__device__ __forceinline__ float2 ToFloat2(std::uint32_t bits);
template <>
__device__ __forceinline__ float2 ToFloat2<__half>(std::uint32_t bits) {
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}
template <>
__device__ __forceinline__ float2 ToFloat2<__nv_bfloat16>(std::uint32_t bits) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
}

// acc += the dot product of 8 weights and 8 inputs.
template <typename T>
__device__ __forceinline__ float Dot8(const uint4& w, const uint4& x, float acc) {
  const std::uint32_t wb[4] = {w.x, w.y, w.z, w.w};
  const std::uint32_t xb[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 wf = ToFloat2<T>(wb[i]);
    const float2 xf = ToFloat2<T>(xb[i]);
    acc = fmaf(wf.x, xf.x, acc);
    acc = fmaf(wf.y, xf.y, acc);
  }
  return acc;
}

template <typename OutT>
__device__ __forceinline__ float LoadBias(const void* bias, std::int64_t i) {
  return bias == nullptr ? 0.0f : ToFloat(static_cast<const OutT*>(bias)[i]);
}

// One warp per output row (a gate/up pair of rows when kGated), rows strided over the grid; the
// block first copies the m input rows into shared memory, where every warp reads them.
// Lane l reads 16-byte chunks l, l + 32, ... of the row: each warp load is 512 contiguous bytes.
template <typename T, typename OutT, int M, bool kGated>
__global__ void __launch_bounds__(kThreads) GemvKernel(GemvArgs a) {
  extern __shared__ uint4 sx[];  // [M][chunks]
  const std::int64_t chunks = a.chunks;
  GridDependencyWait();
  GridDependencyLaunchDependents();
  for (std::int64_t i = threadIdx.x; i < M * chunks; i += kThreads) {
    const std::int64_t t = i / chunks, c = i - t * chunks;
    sx[i] = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.x) + t * a.x_stride + c * 8);
  }
  __syncthreads();

  const int lane = threadIdx.x & 31;
  const uint4* w = static_cast<const uint4*>(a.w);
  constexpr int kRowsPerWarp = kGated ? 2 : 1;
  constexpr int kLoads = kUnroll / kRowsPerWarp;  // same bytes in flight either way
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
       row < a.rows; row += static_cast<std::int64_t>(gridDim.x) * kWarps) {
    const uint4* w_row[kRowsPerWarp];
    w_row[0] = w + row * chunks;
    if constexpr (kGated) w_row[1] = w + (a.rows + row) * chunks;
    float acc[kRowsPerWarp][M] = {};
    for (std::int64_t base = lane; base < chunks; base += 32 * kLoads) {
      uint4 v[kRowsPerWarp][kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const std::int64_t c = base + 32 * u;
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          v[r][u] = c < chunks ? LoadStreaming(w_row[r] + c) : make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const std::int64_t c = base + 32 * u;
        if (c >= chunks) break;
#pragma unroll
        for (int t = 0; t < M; ++t) {
          const uint4 xv = sx[t * chunks + c];
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) acc[r][t] = Dot8<T>(v[r][u], xv, acc[r][t]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int t = 0; t < M; ++t) acc[r][t] = WarpSum(acc[r][t]);
    if (lane < M) {
      // Lane t writes token t (a register array indexed by a runtime value would spill).
      float g = 0.0f, u = 0.0f;
#pragma unroll
      for (int t = 0; t < M; ++t) {
        if (t == lane) {
          g = acc[0][t];
          if constexpr (kGated) u = acc[1][t];
        }
      }
      OutT* y = static_cast<OutT*>(a.y) + lane * a.y_stride;
      if constexpr (kGated) {
        g += LoadBias<OutT>(a.bias, row);
        u += LoadBias<OutT>(a.bias, a.rows + row);
        y[row] = FromFloat<OutT>(g / (1.0f + __expf(-g)) * u);
      } else {
        g += LoadBias<OutT>(a.bias, row);
        if (a.accumulate) g += ToFloat(y[row]);
        y[row] = FromFloat<OutT>(g);
      }
    }
  }
}

// Dynamic shared memory a kernel may use without opting in.
constexpr std::size_t kDefaultSharedBytes = 48 << 10;

int MaxSharedBytes() {
  return CurrentDeviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                static_cast<int>(kDefaultSharedBytes));
}

template <typename T, typename OutT, int M, bool kGated>
cudaError_t LaunchRows(const GemvArgs& args, cudaStream_t stream) {
  auto* kernel = GemvKernel<T, OutT, M, kGated>;
  const auto smem = static_cast<std::size_t>(M * args.chunks * 16);
  if (smem > kDefaultSharedBytes) {
    // NOTE: per call, not once per process: the opt-in belongs to the current device's context,
    // and one process may drive several GPUs (a Triton instance group). Only k > 24576 needs it.
    // Always the device's maximum, so that two threads launching different sizes never lower it
    // under each other's launch.
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, MaxSharedBytes());
    if (err != cudaSuccess) return err;
  }
  // Enough blocks for every row when that fits in a few waves; the row loop covers the rest.
  const std::int64_t wanted = CeilDiv(args.rows, kWarps);
  const std::int64_t cap =
      static_cast<std::int64_t>(CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, 132)) * 16;
  const auto blocks = static_cast<unsigned>(wanted < cap ? wanted : cap);
  return LaunchProgrammatic(kernel, dim3(blocks), dim3(kThreads), smem, stream, args);
}

template <typename T, typename OutT, bool kGated>
cudaError_t LaunchTyped(std::int64_t m, const GemvArgs& args, cudaStream_t stream) {
  static_assert(kGemvMaxRows == 1, "instantiate the kernel for every row count Gemv takes");
  return m == 1 ? LaunchRows<T, OutT, 1, kGated>(args, stream) : cudaErrorNotSupported;
}

}  // namespace

bool GemvSupports(DType dtype, std::int64_t m, std::int64_t k, std::int64_t x_stride, const void* x,
                  const void* w) {
  return (dtype == DType::kFloat16 || dtype == DType::kBFloat16) && m >= 1 && m <= kGemvMaxRows &&
         k > 0 && k % 8 == 0 && x_stride % 8 == 0 && Aligned16(x) && Aligned16(w) &&
         m * k * 2 <= MaxSharedBytes();
}

cudaError_t Gemv(void* y, DType y_dtype, std::int64_t y_stride, const void* x,
                 std::int64_t x_stride, const void* w, const void* bias, DType dtype,
                 std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate,
                 cudaStream_t stream) {
  if (!GemvSupports(dtype, m, k, x_stride, x, w) ||
      (y_dtype != dtype && y_dtype != DType::kFloat32)) {
    return cudaErrorNotSupported;
  }
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  const GemvArgs args{y, y_stride, x, x_stride, w, bias, n, k / 8, accumulate};
  if (y_dtype == DType::kFloat32) {
    INFLIGHT_DISPATCH_HALF(dtype, T, { return LaunchTyped<T, float, false>(m, args, stream); });
  }
  INFLIGHT_DISPATCH_HALF(dtype, T, { return LaunchTyped<T, T, false>(m, args, stream); });
  return cudaErrorNotSupported;
}

cudaError_t GemvSwiGlu(void* out, std::int64_t out_stride, const void* x, std::int64_t x_stride,
                       const void* w, const void* bias, DType dtype, std::int64_t m,
                       std::int64_t inter, std::int64_t k, cudaStream_t stream) {
  if (!GemvSupports(dtype, m, k, x_stride, x, w)) return cudaErrorNotSupported;
  if (inter <= 0) return inter == 0 ? cudaSuccess : cudaErrorInvalidValue;
  const GemvArgs args{out, out_stride, x, x_stride, w, bias, inter, k / 8, false};
  INFLIGHT_DISPATCH_HALF(dtype, T, { return LaunchTyped<T, T, true>(m, args, stream); });
  return cudaErrorNotSupported;
}

}  // namespace inflight::kernels::cuda
