// Device helpers shared by the CUDA kernels: fp16/bf16 <-> fp32, warp and block reductions, dtype
// dispatch. Internal to src/kernels/cuda (launch headers expose only plain C++ types).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "common/dtype.h"
#include "common/env_switch.h"

namespace inflight::kernels::cuda {

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Two floats rounded to T and packed, lo in the low half (the element with the lower column).
template <typename T>
__device__ __forceinline__ std::uint32_t PackPair(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// `warp_reduce` (WarpSum, WarpMax) over the block; every thread gets the result. A block's unused
// warp slots read 0 (so a max is of values >= 0). Precondition: blockDim.x is a multiple of 32.
template <typename WarpReduce>
__device__ __forceinline__ float BlockReduce(float v, WarpReduce warp_reduce) {
  __shared__ float scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce(v);
  __syncthreads();  // NOTE: scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.0f;
  return warp_reduce(v);
}

// NOTE: lambdas, not the functions' addresses, so that each reduction inlines (and keeps its own
// scratch, as before).
__device__ __forceinline__ float BlockSum(float v) {
  return BlockReduce(v, [](float x) { return WarpSum(x); });
}
__device__ __forceinline__ float BlockMax(float v) {  // of values >= 0
  return BlockReduce(v, [](float x) { return WarpMax(x); });
}

// Programmatic dependent launch (PDL, sm_90+). A kernel launched by LaunchProgrammatic may start
// while the kernel before it in the stream drains, so it must call GridDependencyWait before it
// reads anything an earlier kernel wrote or writes anything an earlier kernel reads; that wait
// returns once the previous grid has finished and its writes are visible (and so, transitively,
// those of every grid before it). GridDependencyLaunchDependents lets the next programmatic kernel
// begin its launch early. Both are no-ops below sm_90 and in a kernel launched the ordinary way.
__device__ __forceinline__ void GridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void GridDependencyLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// An attribute of the current device, or `fallback` when the runtime cannot tell.
inline int CurrentDeviceAttribute(cudaDeviceAttr attribute, int fallback) {
  int device = 0, value = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) {
    return fallback;
  }
  return value;
}

// Whether the current device is sm_90 or later (programmatic launch, thread-block clusters).
inline bool CurrentDeviceIsSm90OrLater() {
  return CurrentDeviceAttribute(cudaDevAttrComputeCapabilityMajor, 0) >= 9;
}

// The devices (bit d: device d, d < 64) on which a one-time preparation (raised shared-memory
// limits, cached occupancy) has run, so that launches there need no runtime call a graph capture
// would refuse. One instance per kind of preparation, at namespace scope.
class PreparedDevices {
 public:
  bool Current() const {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return false;
    return ((bits_.load(std::memory_order_acquire) >> device) & 1u) != 0;
  }
  void Mark(int device) {
    if (device >= 0 && device < 64) {
      bits_.fetch_or(std::uint64_t{1} << device, std::memory_order_acq_rel);
    }
  }

 private:
  std::atomic<std::uint64_t> bits_{0};
};

// Whether `kernel`'s sm_90a code is what the current device runs: a build without 90a-real, or a
// device other than compute capability 9.0, has none, and the kernels that need it (wgmma, TMA)
// fall back. No code for the device is an answer, not a failure: the error is cleared.
template <typename Kernel>
bool Sm90aCodeRuns(Kernel* kernel) {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.binaryVersion == 90 && attr.ptxVersion >= 90;
}

// Whether to ask for programmatic launch: on sm_90 and later, unless the environment sets
// INFLIGHT_DISABLE_PDL=1 (an A/B switch for measuring what PDL buys).
inline bool ProgrammaticLaunchEnabled() {
  static const bool disabled = EnvSwitchSet("INFLIGHT_DISABLE_PDL");
  return !disabled && CurrentDeviceIsSm90OrLater();
}

// The largest grid (in blocks) that LaunchProgrammatic launches programmatically: 8 blocks per SM,
// one wave of 256-thread blocks. Decode-sized kernels gained 0.2-0.6 us a call from PDL on an H100
// (RMSNorm 1 row 1.9 -> 1.4 us in a graph), while a grid of several waves (RoPE at 64 tokens,
// 1280 blocks) lost 0.7 us; gemv was unchanged either way. INFLIGHT_PDL_MAX_BLOCKS overrides it.
inline std::int64_t ProgrammaticLaunchMaxBlocks() {
  static const std::int64_t from_env = EnvInteger("INFLIGHT_PDL_MAX_BLOCKS", -1);
  if (from_env >= 0) return from_env;
  return std::int64_t{8} * CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, 0);
}

// Launches `kernel` as a programmatic dependent of the previous work in `stream` where the device
// has PDL and the grid is at most ProgrammaticLaunchMaxBlocks(), else as an ordinary launch. The
// kernel must begin with GridDependencyWait (see above). Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t LaunchProgrammatic(void (*kernel)(Params...), dim3 grid, dim3 block,
                               std::size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute programmatic = {};
  programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  programmatic.val.programmaticStreamSerializationAllowed = 1;
  const bool pdl =
      ProgrammaticLaunchEnabled() &&
      static_cast<std::int64_t>(grid.x) * grid.y * grid.z <= ProgrammaticLaunchMaxBlocks();
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = pdl ? &programmatic : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

// The configuration of a launch in clusters of cluster_x blocks along x (sm_90), programmatic as
// LaunchProgrammatic's where ProgrammaticLaunchEnabled() (at any grid size): attrs[0] is the
// cluster shape, attrs[1] the programmatic flag. config.attrs points into attrs, hence no copies;
// launch with cudaLaunchKernelEx(&config, ...).
struct ClusterLaunch {
  ClusterLaunch(dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream,
                unsigned cluster_x) {
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = cluster_x;
    attrs[0].val.clusterDim.y = 1;
    attrs[0].val.clusterDim.z = 1;
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = 1;
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = attrs;
    config.numAttrs = ProgrammaticLaunchEnabled() ? 2 : 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;

  cudaLaunchAttribute attrs[2] = {};
  cudaLaunchConfig_t config = {};
};

// SiLU as every SwiGLU pass here computes it (one formula, so fused and unfused passes agree), on
// the hardware exp2 and reciprocal: 4 instructions where expf and a true division took ~20, which
// left the FP8 SwiGLU codes pass issue-bound (ncu on an H200: 63 instructions an element, issue
// slots 70-76% busy, DRAM 23-31%). __expf's error (2 + 1.2|g| ulps) keeps the result within ~1e-5
// of SiLU relative, below fp16's and bf16's rounding; past g < -87 the reciprocal of an
// overflowing 1 + e^-g gives 0 where SiLU is below 1e-35.
__device__ __forceinline__ float Silu(float g) {
  return __fdividef(g, 1.0f + __expf(-g));
}

// 16 bytes as one vector access or as 8 fp16/bf16 elements.
template <typename T>
union Vec8 {
  uint4 bits;
  T e[8];
};

// Whether 16-byte vector accesses may start at p.
inline bool Aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

__host__ __device__ constexpr std::int64_t CeilDiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace inflight::kernels::cuda

// Runs the statements with T bound to the CUDA type of `dtype` (fp16 or bf16); other dtypes return
// cudaErrorInvalidValue from the enclosing launcher.
#define INFLIGHT_DISPATCH_HALF(dtype, T, ...) \
  switch (dtype) {                            \
    case ::inflight::DType::kFloat16: {       \
      using T = __half;                       \
      __VA_ARGS__;                            \
      break;                                  \
    }                                         \
    case ::inflight::DType::kBFloat16: {      \
      using T = __nv_bfloat16;                \
      __VA_ARGS__;                            \
      break;                                  \
    }                                         \
    default:                                  \
      return cudaErrorInvalidValue;           \
  }
