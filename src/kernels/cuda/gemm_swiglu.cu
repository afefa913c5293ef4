#include "kernels/cuda/gemm_swiglu.h"

#include <cuda.h>

#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/hopper_ptx.cuh"

namespace inflight::kernels::cuda {
namespace {

// A CTA computes 128 rows x 128 output columns, from a 256-row weight tile: the 128 gate rows of
// those columns and the 128 up rows, so that each accumulator thread holds a column's gate and up
// values side by side (fragments i and i + 16 of an m64n256 wgmma). Warpgroup 0 loads and finishes;
// warpgroups 1 and 2 multiply, 64 rows each:
//   - one thread of warpgroup 0 issues the tensor copies into kStages shared-memory stages;
//   - warpgroups 1 and 2 run the wgmmas, round the gate and up accumulators to T into a staging
//     buffer of their own, and go on to the next tile at once;
//   - warps 1-3 of warpgroup 0 read the staging buffers, apply silu(g) u and write the output.
// Done by the multiplying warpgroups, the SwiGLU and the stores (two MUFU operations per element)
// kept the tensor cores idle ~6% of the time at 8192 rows on an H200; beside the next tile's wgmmas
// they cost ~2-3%. Rounding g and u to T first matches the separate path (a T-typed gate_up layer,
// then the SwiGLU kernel). CTAs are persistent.
constexpr int kRows = 128;
constexpr int kCols = 128;
constexpr int kDepth = 64;  // one 128-byte swizzle row of 16-bit elements
constexpr int kStages = 3;
constexpr int kThreads = 384;
constexpr int kMathWarps = 8;
constexpr int kFinishThreads = 96;  // warps 1-3
constexpr int kLoaderRegs = 56;
constexpr int kMathRegs = 224;
static_assert(kLoaderRegs * 128 + kMathRegs * 256 <= kThreads * (65536 / kThreads / 8 * 8),
              "the register split must fit the launch's allocation");
constexpr int kATileBytes = kRows * kDepth * 2;
constexpr int kBHalfBytes = kCols * kDepth * 2;
constexpr int kStageBytes = kATileBytes + 2 * kBHalfBytes;
// A staging row: 128 gate then 128 up values, padded by 16 bytes so that the 8 rows a warp writes
// at once start 4 banks apart.
constexpr int kStagingRowBytes = 2 * kCols * 2 + 16;
constexpr int kStagingBytes = 64 * kStagingRowBytes;  // one multiplying warpgroup's rows
// Barriers: full and empty per stage, then staged and drained per multiplying warpgroup.
constexpr int kNumBarriers = 2 * kStages + 4;
// Stages start 1024-byte aligned (the swizzle atom); staging buffers and barriers follow them.
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStagingBytes + kNumBarriers * 8;
// Tiles are visited in groups of kGroupBlocks row blocks, column by column, so that the CTAs in
// flight at once share ~16 row blocks and ~8 weight tiles: ~32 MB, within L2.
constexpr int kGroupBlocks = 16;
// CTAs a cluster: 2 along the rows, sharing each weight tile (multicast). Against one CTA (the same
// kernel, each CTA loading its whole weight tile): 2-5% faster from 1024 rows on an H200.
constexpr int kCluster = 2;

struct GemmSwiGluArgs {
  void* out;
  std::int64_t out_stride;
  int m, inter, m_units, n_blocks, k_tiles;
};

struct TileCoord {
  int m_unit, n_block;
};

// Work units (kCluster row blocks of one weight tile) in groups of kGroupBlocks row blocks.
__device__ __forceinline__ TileCoord UnitAt(int unit, int m_units, int n_blocks) {
  constexpr int kGroupUnits = kGroupBlocks / kCluster;
  const int per_group = kGroupUnits * n_blocks;
  const int group = unit / per_group;
  const int first = group * kGroupUnits;
  const int size = min(kGroupUnits, m_units - first);
  const int local = unit - group * per_group;
  return {first + local % size, local / size};
}

__device__ __forceinline__ void StoreShared32(std::uint32_t addr, std::uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// Rows row0 .. row0 + 63 of a tile from a staging buffer to out: silu(g) u, 8 columns (16 bytes)
// a thread at a time, rows at or past m skipped.
template <typename T>
__device__ __forceinline__ void FinishRows(const GemmSwiGluArgs& args, std::uint32_t staging,
                                           int row0, int col0, int thread) {
  constexpr int kChunksPerRow = kCols / 8;
  for (int chunk = thread; chunk < 64 * kChunksPerRow; chunk += kFinishThreads) {
    const int r = chunk / kChunksPerRow, c = (chunk % kChunksPerRow) * 8;
    if (row0 + r >= args.m) break;  // chunks run row by row
    const std::uint32_t at = staging + static_cast<std::uint32_t>(r * kStagingRowBytes + c * 2);
    Vec8<T> g, u, o;
    g.bits = detail::LoadShared128(at);
    u.bits = detail::LoadShared128(at + kCols * 2);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float gj = ToFloat(g.e[j]);
      // NOTE: approximate exp and division. With expf and an IEEE division (~5x the
      // instructions) these warps slowed the wgmmas beside them by 3% at 8192 rows on an H200;
      // the error they add is far below T's rounding. For g below ~-88 the quotient is -0.
      o.e[j] = FromFloat<T>(__fdividef(gj, 1.0f + __expf(-gj)) * ToFloat(u.e[j]));
    }
    T* dst = static_cast<T*>(args.out) + static_cast<std::int64_t>(row0 + r) * args.out_stride +
             col0 + c;
    *reinterpret_cast<uint4*>(dst) = o.bits;
  }
}

// Grid: (kCluster x clusters), Block: (kThreads), kSmemBytes of dynamic shared memory; clusters of
// kCluster CTAs along x. The CTAs of a cluster take row blocks kCluster u .. kCluster u +
// kCluster - 1 of one weight tile, and each loads 1 / kCluster of that weight tile into all of
// them (multicast), so that L2 serves each weight tile once per cluster.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    GemmSwiGluKernel(const __grid_constant__ CUtensorMap x_map,
                     const __grid_constant__ CUtensorMap w_map, GemmSwiGluArgs args) {
  using namespace detail;
  extern __shared__ unsigned char smem[];
  const std::uint32_t base =
      (static_cast<std::uint32_t>(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
  const std::uint32_t staging0 = base + kStages * kStageBytes;
  const std::uint32_t bars = staging0 + 2 * kStagingBytes;
  const auto bar = [bars](int i) { return bars + 8u * static_cast<std::uint32_t>(i); };
  const auto full = [&bar](int s) { return bar(s); };
  const auto empty = [&bar](int s) { return bar(kStages + s); };
  const auto staged = [&bar](int g) { return bar(2 * kStages + g); };
  const auto drained = [&bar](int g) { return bar(2 * kStages + 2 + g); };
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const std::uint32_t rank = ClusterCtaRank();
  if (threadIdx.x == 0) {
    PrefetchTensorMap(&x_map);
    PrefetchTensorMap(&w_map);
    for (int s = 0; s < kStages; ++s) {
      MbarrierInit(full(s), 1);
      MbarrierInit(empty(s), kMathWarps * kCluster);  // a stage is free once every CTA read it
    }
    for (int g = 0; g < 2; ++g) {
      MbarrierInit(staged(g), 128);
      MbarrierInit(drained(g), kFinishThreads);
    }
    FenceMbarrierInit();
  }
  // The peer's barriers must exist before anything arrives on them.
  ClusterSync();
  const int num_units = args.m_units * args.n_blocks;
  const int first_unit = static_cast<int>(blockIdx.x) / kCluster;
  const int unit_stride = static_cast<int>(gridDim.x) / kCluster;
  const auto tile_row = [&](const TileCoord& c) {
    return (c.m_unit * kCluster + static_cast<int>(rank)) * kRows;
  };

  if (warp < 4) {
    SetMaxRegistersDecrease<kLoaderRegs>();
    if (threadIdx.x == 0) {
      GridDependencyWait();  // x is the kernel before's output
      int s = 0, phase = 0;
      for (int unit = first_unit; unit < num_units; unit += unit_stride) {
        const TileCoord c = UnitAt(unit, args.m_units, args.n_blocks);
        const int row = tile_row(c), col = c.n_block * kCols;
        for (int kt = 0; kt < args.k_tiles; ++kt) {
          MbarrierWait(empty(s), phase ^ 1);
          const std::uint32_t a = base + static_cast<std::uint32_t>(s * kStageBytes);
          const std::uint32_t b = a + kATileBytes;
          MbarrierArriveExpectTx(full(s), kStageBytes);
          TmaLoad2d(a, &x_map, kt * kDepth, row, full(s));
          // This CTA's half (gate or up) of the weight tile, into both CTAs.
          TmaLoad2dMulticast(b + rank * kBHalfBytes, &w_map, kt * kDepth,
                             static_cast<int>(rank) * args.inter + col, full(s), 0x3);
          if (++s == kStages) {
            s = 0;
            phase ^= 1;
          }
        }
      }
      GridDependencyLaunchDependents();
    } else if (warp > 0) {
      GridDependencyWait();  // out may be what the kernels before read
      const int thread = static_cast<int>(threadIdx.x) - 32;
      int phase = 0;
      for (int unit = first_unit; unit < num_units; unit += unit_stride) {
        const TileCoord c = UnitAt(unit, args.m_units, args.n_blocks);
#pragma unroll 1
        for (int g = 0; g < 2; ++g) {
          MbarrierWait(staged(g), phase);
          FinishRows<T>(args, staging0 + g * kStagingBytes, tile_row(c) + 64 * g, c.n_block * kCols,
                        thread);
          MbarrierArrive(drained(g));
        }
        phase ^= 1;
      }
    }
  } else {
    SetMaxRegistersIncrease<kMathRegs>();
    const int group = warp / 4 - 1;  // rows 64 group .. 64 group + 63 of the tile
    // K-major operands: no leading offset (1 by convention), 8-row groups 1024 bytes apart.
    const std::uint64_t a_desc = SwizzledSmemDesc(base + group * 64 * 128, 16, 1024);
    const std::uint64_t b_desc = SwizzledSmemDesc(base + kATileBytes, 16, 1024);
    const auto release = [&](int stage) {
      if (lane < kCluster) {
        MbarrierArriveCluster(empty(stage), static_cast<std::uint32_t>(lane));  // lane r: CTA r
      }
    };
    // This thread's accumulator rows, in its warpgroup's staging buffer.
    const std::uint32_t staging =
        staging0 + group * kStagingBytes +
        static_cast<std::uint32_t>(((warp % 4) * 16 + (lane >> 2)) * kStagingRowBytes +
                                   (lane & 3) * 4);
    float acc[32][4];
    int s = 0, phase = 0, held = 0, staging_phase = 0;
    for (int unit = first_unit; unit < num_units; unit += unit_stride) {
      for (int kt = 0; kt < args.k_tiles; ++kt) {
        MbarrierWait(full(s), phase);
        const auto stage = static_cast<std::uint64_t>((s * kStageBytes) >> 4);
        WgmmaFence();
        PinAccumulators(acc);
#pragma unroll
        for (int ks = 0; ks < kDepth / 16; ++ks) {
          // 16 elements = 32 bytes along the swizzled row.
          const std::uint64_t step = static_cast<std::uint64_t>(ks) * 2;
          WgmmaSS<T, 2 * kCols>(acc, a_desc + stage + step, b_desc + stage + step,
                                (kt > 0 || ks > 0) ? 1 : 0);
        }
        WgmmaCommit();
        WgmmaWait<1>();  // the stage before this one is read
        PinAccumulators(acc);
        if (kt > 0) release(held);
        held = s;
        if (++s == kStages) {
          s = 0;
          phase ^= 1;
        }
      }
      WgmmaWait<0>();
      PinAccumulators(acc);
      release(held);
      // Gate and up to the staging buffer once the finishing warps have read the last tile's.
      MbarrierWait(drained(group), staging_phase ^ 1);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int e = half + half;  // fragment elements 2 half and 2 half + 1: row + 8 half
#pragma unroll
        for (int i = 0; i < 2 * kCols / 8; ++i) {
          StoreShared32(staging + static_cast<std::uint32_t>(half * 8 * kStagingRowBytes + i * 16),
                        PackPair<T>(acc[i][e], acc[i][e + 1]));
        }
      }
      MbarrierArrive(staged(group));
      staging_phase ^= 1;
    }
  }
  // The peer may still arrive on this CTA's barriers until it is done.
  __syncwarp();
  ClusterSync();
}

// cuTensorMapEncodeTiled through the runtime's driver entry point, so that nothing links libcuda
// (signature from cuda.h, CUDA 12.0).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn EncodeTiled() {
  static const EncodeTiledFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // NOTE: an old driver is an answer (take the other path), not a failure
      return static_cast<EncodeTiledFn>(nullptr);
    }
    return reinterpret_cast<EncodeTiledFn>(p);
  }();
  return fn;
}

// A row-major [rows, cols] matrix of 16-bit elements, read in boxes of kDepth columns x box_rows
// rows laid out in the 128-byte swizzle that the wgmma descriptors above describe.
bool EncodeMatrix(CUtensorMap* map, DType dtype, const void* base, std::int64_t rows,
                  std::int64_t cols, std::int64_t row_stride, int box_rows) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride) * 2};
  const cuuint32_t box[2] = {kDepth, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUtensorMapDataType type = dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                             : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return EncodeTiled()(map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename T>
bool KernelRunnable() {
  static const bool runnable = [] {
    if (!Sm90aCodeRuns(GemmSwiGluKernel<T>)) return false;
    return cudaFuncSetAttribute(GemmSwiGluKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                kSmemBytes) == cudaSuccess;
  }();
  return runnable;
}

// How many clusters are resident at once (one CTA per SM).
template <typename T>
int ResidentClusters(const cudaLaunchConfig_t& config) {
  static const int clusters = [&config] {
    cudaLaunchConfig_t query = config;
    query.numAttrs = 1;  // the cluster shape alone
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, GemmSwiGluKernel<T>, &query) != cudaSuccess || n < 1) {
      cudaGetLastError();
      n = CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, kCluster) / kCluster;
    }
    return n;
  }();
  return clusters;
}

template <typename T>
cudaError_t Launch(const CUtensorMap& x_map, const CUtensorMap& w_map, const GemmSwiGluArgs& args,
                   cudaStream_t stream) {
  ClusterLaunch launch(dim3(kCluster), dim3(kThreads), kSmemBytes, stream, kCluster);
  const int clusters = std::min(args.m_units * args.n_blocks, ResidentClusters<T>(launch.config));
  launch.config.gridDim = dim3(static_cast<unsigned>(clusters * kCluster));
  return cudaLaunchKernelEx(&launch.config, GemmSwiGluKernel<T>, x_map, w_map, args);
}

bool Aligned(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace

bool GemmSwiGluSupports(DType dtype, std::int64_t m, std::int64_t inter, std::int64_t k,
                        const void* x, std::int64_t x_stride, const void* w, const void* out,
                        std::int64_t out_stride) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  if (dtype != DType::kBFloat16 && dtype != DType::kFloat16) return false;
  if (m < 1 || m >= kLimit || inter < kCols || inter % kCols != 0 || 2 * inter >= kLimit) {
    return false;
  }
  if (k < 8 || k % 8 != 0 || k >= kLimit || x_stride < k || x_stride % 8 != 0) return false;
  if (out_stride < inter || out_stride % 8 != 0) return false;
  if (!Aligned(x, 16) || !Aligned(w, 16) || !Aligned(out, 16)) return false;
  if (EncodeTiled() == nullptr) return false;
  return dtype == DType::kBFloat16 ? KernelRunnable<__nv_bfloat16>() : KernelRunnable<__half>();
}

cudaError_t GemmSwiGlu(void* out, std::int64_t out_stride, const void* x, std::int64_t x_stride,
                       const void* w, DType dtype, std::int64_t m, std::int64_t inter,
                       std::int64_t k, cudaStream_t stream) {
  if (!GemmSwiGluSupports(dtype, m, inter, k, x, x_stride, w, out, out_stride)) {
    return cudaErrorNotSupported;
  }
  CUtensorMap x_map{}, w_map{};
  if (!EncodeMatrix(&x_map, dtype, x, m, k, x_stride, kRows) ||
      !EncodeMatrix(&w_map, dtype, w, 2 * inter, k, k, kCols)) {
    return cudaErrorNotSupported;
  }
  GemmSwiGluArgs args{};
  args.out = out;
  args.out_stride = out_stride;
  args.m = static_cast<int>(m);
  args.inter = static_cast<int>(inter);
  args.m_units = static_cast<int>(CeilDiv(CeilDiv(m, kRows), kCluster));
  args.n_blocks = static_cast<int>(inter / kCols);
  args.k_tiles = static_cast<int>(CeilDiv(k, kDepth));
  if (static_cast<std::int64_t>(args.m_units) * args.n_blocks >= (std::int64_t{1} << 30)) {
    return cudaErrorNotSupported;  // int unit indices
  }
  INFLIGHT_DISPATCH_HALF(dtype, T, { return Launch<T>(x_map, w_map, args, stream); });
  return cudaErrorNotSupported;
}

}  // namespace inflight::kernels::cuda
