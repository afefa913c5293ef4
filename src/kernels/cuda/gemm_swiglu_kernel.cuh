// The gate/up GEMM with SwiGLU in its epilogue, as a kernel template over its operands and its
// finishing step: gemm_swiglu.cu instantiates it for fp16 / bf16 (the output is silu(g) u in the
// dtype), gemm_swiglu_fp8.cu for E4M3 codes (the output is the down linear's FP8 codes). Internal
// to src/kernels/cuda.
//
// A CTA computes 128 rows x 128 output columns, from a 256-row weight tile: the 128 gate rows of
// those columns and the 128 up rows, so that each accumulator thread holds a column's gate and up
// values side by side (fragments i and i + 16 of an m64n256 wgmma). Warpgroup 0 loads and finishes;
// warpgroups 1 and 2 multiply, 64 rows each:
//   - one thread of warpgroup 0 issues the tensor copies into kStages shared-memory stages;
//   - warpgroups 1 and 2 run the wgmmas, round the gate and up accumulators to Epi::Staged into a
//     staging buffer of their own, and go on to the next tile at once;
//   - warps 1-3 of warpgroup 0 read the staging buffers and hand each 8 columns of a row to
//     Epi::Finish8, which writes the output.
// Done by the multiplying warpgroups, the SwiGLU and the stores (two MUFU operations per element)
// kept the tensor cores idle ~6% of the time at 8192 rows on an H200; beside the next tile's wgmmas
// they cost ~2-3%. CTAs are persistent.
//
// A stage holds 128 bytes of each row (the 128-byte swizzle row): 64 elements of fp16 / bf16 or 128
// E4M3 codes, four wgmmas either way (k16 or k32, 32 bytes each).
//
// Epi: a trivially copyable struct with
//   using Operand = __nv_bfloat16, __half or std::uint8_t (E4M3 codes);
//   using Staged = __nv_bfloat16 or __half: what the accumulators are rounded to;
//   __device__ void Finish8(const Vec8<Staged>& g, const Vec8<Staged>& u, int row, int col) const;
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/hopper_ptx.cuh"

namespace inflight::kernels::cuda::swiglu_gemm {

constexpr int kRows = 128;
constexpr int kCols = 128;
constexpr int kRowBytes = 128;  // of a stage's rows: one 128-byte swizzle row
constexpr int kStages = 3;
constexpr int kThreads = 384;
constexpr int kMathWarps = 8;
constexpr int kFinishThreads = 96;  // warps 1-3
constexpr int kLoaderRegs = 56;
constexpr int kMathRegs = 224;
static_assert(kLoaderRegs * 128 + kMathRegs * 256 <= kThreads * (65536 / kThreads / 8 * 8),
              "the register split must fit the launch's allocation");
constexpr int kATileBytes = kRows * kRowBytes;
constexpr int kBHalfBytes = kCols * kRowBytes;
constexpr int kStageBytes = kATileBytes + 2 * kBHalfBytes;
// A staging row: 128 gate then 128 up values (16-bit), padded by 16 bytes so that the 8 rows a warp
// writes at once start 4 banks apart.
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

template <class Epi>
struct Args {
  Epi epi;
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

// Rows row0 .. row0 + 63 of a tile from a staging buffer to Epi::Finish8, 8 columns a thread at a
// time, rows at or past m skipped.
template <class Epi>
__device__ __forceinline__ void FinishRows(const Args<Epi>& args, std::uint32_t staging, int row0,
                                           int col0, int thread) {
  using S = typename Epi::Staged;
  constexpr int kChunksPerRow = kCols / 8;
  for (int chunk = thread; chunk < 64 * kChunksPerRow; chunk += kFinishThreads) {
    const int r = chunk / kChunksPerRow, c = (chunk % kChunksPerRow) * 8;
    if (row0 + r >= args.m) break;  // chunks run row by row
    const std::uint32_t at = staging + static_cast<std::uint32_t>(r * kStagingRowBytes + c * 2);
    Vec8<S> g, u;
    g.bits = detail::LoadShared128(at);
    u.bits = detail::LoadShared128(at + kCols * 2);
    args.epi.Finish8(g, u, row0 + r, col0 + c);
  }
}

// Four wgmmas over a stage's 128 bytes of k (32 bytes each).
template <class Epi>
__device__ __forceinline__ void MultiplyStage(float (&acc)[32][4], std::uint64_t a_desc,
                                              std::uint64_t b_desc, bool first) {
  using namespace detail;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const std::uint64_t step = static_cast<std::uint64_t>(ks) * 2;  // 32 bytes, in 16-byte units
    const int accumulate = (!first || ks > 0) ? 1 : 0;
    if constexpr (std::is_same_v<typename Epi::Operand, std::uint8_t>) {
      WgmmaSSE4M3N256(acc, a_desc + step, b_desc + step, accumulate);
    } else {
      WgmmaSS<typename Epi::Operand, 2 * kCols>(acc, a_desc + step, b_desc + step, accumulate);
    }
  }
}

// Grid: (kCluster x clusters), Block: (kThreads), kSmemBytes of dynamic shared memory; clusters of
// kCluster CTAs along x. The CTAs of a cluster take row blocks kCluster u .. kCluster u +
// kCluster - 1 of one weight tile, and each loads 1 / kCluster of that weight tile into all of
// them (multicast), so that L2 serves each weight tile once per cluster.
template <class Epi>
__global__ void __launch_bounds__(kThreads, 1)
    Kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
           const __grid_constant__ Args<Epi> args) {
  using namespace detail;
  constexpr int kDepth = kRowBytes / static_cast<int>(sizeof(typename Epi::Operand));
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
          FinishRows<Epi>(args, staging0 + g * kStagingBytes, tile_row(c) + 64 * g,
                          c.n_block * kCols, thread);
          MbarrierArrive(drained(g));
        }
        phase ^= 1;
      }
    }
  } else {
    SetMaxRegistersIncrease<kMathRegs>();
    const int group = warp / 4 - 1;  // rows 64 group .. 64 group + 63 of the tile
    // K-major operands: no leading offset (1 by convention), 8-row groups 1024 bytes apart.
    const std::uint64_t a_desc = SwizzledSmemDesc(base + group * 64 * kRowBytes, 16, 1024);
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
        MultiplyStage<Epi>(acc, a_desc + stage, b_desc + stage, kt == 0);
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
                        PackPair<typename Epi::Staged>(acc[i][e], acc[i][e + 1]));
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

inline EncodeTiledFn EncodeTiled() {
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

// A row-major [rows, cols] matrix of Epi::Operand, read in boxes of 128 bytes of a row x box_rows
// rows laid out in the 128-byte swizzle that the wgmma descriptors above describe.
template <class Epi>
bool EncodeMatrix(CUtensorMap* map, const void* base, std::int64_t rows, std::int64_t cols,
                  std::int64_t row_stride, int box_rows) {
  using Operand = typename Epi::Operand;
  constexpr auto kBytes = static_cast<cuuint64_t>(sizeof(Operand));
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride) * kBytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kRowBytes / kBytes),
                             static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUtensorMapDataType type =
      std::is_same_v<Operand, std::uint8_t>    ? CU_TENSOR_MAP_DATA_TYPE_UINT8
      : std::is_same_v<Operand, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return EncodeTiled() != nullptr &&
         EncodeTiled()(map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class Epi>
bool KernelRunnable() {
  static const bool runnable = [] {
    if (EncodeTiled() == nullptr || !Sm90aCodeRuns(Kernel<Epi>)) return false;
    return cudaFuncSetAttribute(Kernel<Epi>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                kSmemBytes) == cudaSuccess;
  }();
  return runnable;
}

// How many clusters are resident at once (one CTA per SM).
template <class Epi>
int ResidentClusters(const cudaLaunchConfig_t& config) {
  static const int clusters = [&config] {
    cudaLaunchConfig_t query = config;
    query.numAttrs = 1;  // the cluster shape alone
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, Kernel<Epi>, &query) != cudaSuccess || n < 1) {
      cudaGetLastError();
      n = CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, kCluster) / kCluster;
    }
    return n;
  }();
  return clusters;
}

// Encodes the operands' tensor maps and launches: x device [m, k] of Epi::Operand with row stride
// x_stride, w device [2 inter, k] contiguous (gate rows, then up rows). The caller has checked
// KernelRunnable, the sizes (inter a multiple of kCols, everything below 2^31) and the alignments.
template <class Epi>
cudaError_t Launch(const Epi& epi, const void* x, std::int64_t x_stride, const void* w,
                   std::int64_t m, std::int64_t inter, std::int64_t k, cudaStream_t stream) {
  constexpr int kDepth = kRowBytes / static_cast<int>(sizeof(typename Epi::Operand));
  CUtensorMap x_map{}, w_map{};
  if (!EncodeMatrix<Epi>(&x_map, x, m, k, x_stride, kRows) ||
      !EncodeMatrix<Epi>(&w_map, w, 2 * inter, k, k, kCols)) {
    return cudaErrorNotSupported;
  }
  Args<Epi> args{epi,
                 static_cast<int>(m),
                 static_cast<int>(inter),
                 static_cast<int>(CeilDiv(CeilDiv(m, kRows), kCluster)),
                 static_cast<int>(inter / kCols),
                 static_cast<int>(CeilDiv(k, kDepth))};
  if (static_cast<std::int64_t>(args.m_units) * args.n_blocks >= (std::int64_t{1} << 30)) {
    return cudaErrorNotSupported;  // int unit indices
  }
  ClusterLaunch launch(dim3(kCluster), dim3(kThreads), kSmemBytes, stream, kCluster);
  const int clusters = std::min(args.m_units * args.n_blocks, ResidentClusters<Epi>(launch.config));
  launch.config.gridDim = dim3(static_cast<unsigned>(clusters * kCluster));
  return cudaLaunchKernelEx(&launch.config, Kernel<Epi>, x_map, w_map, args);
}

}  // namespace inflight::kernels::cuda::swiglu_gemm
