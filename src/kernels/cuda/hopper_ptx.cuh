// Hopper (sm_90a) primitives of our warp-specialised kernels, as thin wrappers over PTX: shared-
// memory matrix descriptors for the 128-byte swizzle, the async-proxy fence, the mbarrier,
// named-barrier and setmaxnreg instructions, tensor-map (TMA) tile loads that complete on an
// mbarrier, and wgmma.mma_async m64nNk16 (m64n256k32 for E4M3) with fp32 accumulators, A from
// shared memory (SS) or registers (RS). Layouts and descriptor fields: PTX ISA, "Asynchronous
// Warpgroup Level Matrix Multiply-Accumulate" (canonical layouts, matrix descriptor format,
// register fragments) and "cp.async.bulk.tensor". Outside an sm_90a compilation the wrappers are
// empty: launchers run these kernels only where their sm_90a code was built.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define INFLIGHT_HAS_WGMMA 1
#else
#define INFLIGHT_HAS_WGMMA 0
#endif

// The 32 accumulator operands of an m64n64 wgmma, in fragment order.
#define INFLIGHT_WGMMA_ACC32_REGS                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define INFLIGHT_WGMMA_ACC32_OPERANDS(d)                                                   \
  "+f"((d)[0][0]), "+f"((d)[0][1]), "+f"((d)[0][2]), "+f"((d)[0][3]), "+f"((d)[1][0]),     \
      "+f"((d)[1][1]), "+f"((d)[1][2]), "+f"((d)[1][3]), "+f"((d)[2][0]), "+f"((d)[2][1]), \
      "+f"((d)[2][2]), "+f"((d)[2][3]), "+f"((d)[3][0]), "+f"((d)[3][1]), "+f"((d)[3][2]), \
      "+f"((d)[3][3]), "+f"((d)[4][0]), "+f"((d)[4][1]), "+f"((d)[4][2]), "+f"((d)[4][3]), \
      "+f"((d)[5][0]), "+f"((d)[5][1]), "+f"((d)[5][2]), "+f"((d)[5][3]), "+f"((d)[6][0]), \
      "+f"((d)[6][1]), "+f"((d)[6][2]), "+f"((d)[6][3]), "+f"((d)[7][0]), "+f"((d)[7][1]), \
      "+f"((d)[7][2]), "+f"((d)[7][3])
// The 64 accumulator operands of an m64n128 wgmma, in fragment order.
#define INFLIGHT_WGMMA_ACC64_REGS                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}"
#define INFLIGHT_WGMMA_ACC64_OPERANDS(d)                                                        \
  "+f"((d)[0][0]), "+f"((d)[0][1]), "+f"((d)[0][2]), "+f"((d)[0][3]), "+f"((d)[1][0]),          \
      "+f"((d)[1][1]), "+f"((d)[1][2]), "+f"((d)[1][3]), "+f"((d)[2][0]), "+f"((d)[2][1]),      \
      "+f"((d)[2][2]), "+f"((d)[2][3]), "+f"((d)[3][0]), "+f"((d)[3][1]), "+f"((d)[3][2]),      \
      "+f"((d)[3][3]), "+f"((d)[4][0]), "+f"((d)[4][1]), "+f"((d)[4][2]), "+f"((d)[4][3]),      \
      "+f"((d)[5][0]), "+f"((d)[5][1]), "+f"((d)[5][2]), "+f"((d)[5][3]), "+f"((d)[6][0]),      \
      "+f"((d)[6][1]), "+f"((d)[6][2]), "+f"((d)[6][3]), "+f"((d)[7][0]), "+f"((d)[7][1]),      \
      "+f"((d)[7][2]), "+f"((d)[7][3]), "+f"((d)[8][0]), "+f"((d)[8][1]), "+f"((d)[8][2]),      \
      "+f"((d)[8][3]), "+f"((d)[9][0]), "+f"((d)[9][1]), "+f"((d)[9][2]), "+f"((d)[9][3]),      \
      "+f"((d)[10][0]), "+f"((d)[10][1]), "+f"((d)[10][2]), "+f"((d)[10][3]), "+f"((d)[11][0]), \
      "+f"((d)[11][1]), "+f"((d)[11][2]), "+f"((d)[11][3]), "+f"((d)[12][0]), "+f"((d)[12][1]), \
      "+f"((d)[12][2]), "+f"((d)[12][3]), "+f"((d)[13][0]), "+f"((d)[13][1]), "+f"((d)[13][2]), \
      "+f"((d)[13][3]), "+f"((d)[14][0]), "+f"((d)[14][1]), "+f"((d)[14][2]), "+f"((d)[14][3]), \
      "+f"((d)[15][0]), "+f"((d)[15][1]), "+f"((d)[15][2]), "+f"((d)[15][3])
// The 128 accumulator operands of an m64n256 wgmma, in fragment order.
#define INFLIGHT_WGMMA_ACC128_REGS                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "    \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "     \
  "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "     \
  "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, "     \
  "%70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, "     \
  "%87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, " \
  "%104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "      \
  "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define INFLIGHT_WGMMA_ACC128_OPERANDS(d)                                                       \
  "+f"((d)[0][0]), "+f"((d)[0][1]), "+f"((d)[0][2]), "+f"((d)[0][3]), "+f"((d)[1][0]),          \
      "+f"((d)[1][1]), "+f"((d)[1][2]), "+f"((d)[1][3]), "+f"((d)[2][0]), "+f"((d)[2][1]),      \
      "+f"((d)[2][2]), "+f"((d)[2][3]), "+f"((d)[3][0]), "+f"((d)[3][1]), "+f"((d)[3][2]),      \
      "+f"((d)[3][3]), "+f"((d)[4][0]), "+f"((d)[4][1]), "+f"((d)[4][2]), "+f"((d)[4][3]),      \
      "+f"((d)[5][0]), "+f"((d)[5][1]), "+f"((d)[5][2]), "+f"((d)[5][3]), "+f"((d)[6][0]),      \
      "+f"((d)[6][1]), "+f"((d)[6][2]), "+f"((d)[6][3]), "+f"((d)[7][0]), "+f"((d)[7][1]),      \
      "+f"((d)[7][2]), "+f"((d)[7][3]), "+f"((d)[8][0]), "+f"((d)[8][1]), "+f"((d)[8][2]),      \
      "+f"((d)[8][3]), "+f"((d)[9][0]), "+f"((d)[9][1]), "+f"((d)[9][2]), "+f"((d)[9][3]),      \
      "+f"((d)[10][0]), "+f"((d)[10][1]), "+f"((d)[10][2]), "+f"((d)[10][3]), "+f"((d)[11][0]), \
      "+f"((d)[11][1]), "+f"((d)[11][2]), "+f"((d)[11][3]), "+f"((d)[12][0]), "+f"((d)[12][1]), \
      "+f"((d)[12][2]), "+f"((d)[12][3]), "+f"((d)[13][0]), "+f"((d)[13][1]), "+f"((d)[13][2]), \
      "+f"((d)[13][3]), "+f"((d)[14][0]), "+f"((d)[14][1]), "+f"((d)[14][2]), "+f"((d)[14][3]), \
      "+f"((d)[15][0]), "+f"((d)[15][1]), "+f"((d)[15][2]), "+f"((d)[15][3]), "+f"((d)[16][0]), \
      "+f"((d)[16][1]), "+f"((d)[16][2]), "+f"((d)[16][3]), "+f"((d)[17][0]), "+f"((d)[17][1]), \
      "+f"((d)[17][2]), "+f"((d)[17][3]), "+f"((d)[18][0]), "+f"((d)[18][1]), "+f"((d)[18][2]), \
      "+f"((d)[18][3]), "+f"((d)[19][0]), "+f"((d)[19][1]), "+f"((d)[19][2]), "+f"((d)[19][3]), \
      "+f"((d)[20][0]), "+f"((d)[20][1]), "+f"((d)[20][2]), "+f"((d)[20][3]), "+f"((d)[21][0]), \
      "+f"((d)[21][1]), "+f"((d)[21][2]), "+f"((d)[21][3]), "+f"((d)[22][0]), "+f"((d)[22][1]), \
      "+f"((d)[22][2]), "+f"((d)[22][3]), "+f"((d)[23][0]), "+f"((d)[23][1]), "+f"((d)[23][2]), \
      "+f"((d)[23][3]), "+f"((d)[24][0]), "+f"((d)[24][1]), "+f"((d)[24][2]), "+f"((d)[24][3]), \
      "+f"((d)[25][0]), "+f"((d)[25][1]), "+f"((d)[25][2]), "+f"((d)[25][3]), "+f"((d)[26][0]), \
      "+f"((d)[26][1]), "+f"((d)[26][2]), "+f"((d)[26][3]), "+f"((d)[27][0]), "+f"((d)[27][1]), \
      "+f"((d)[27][2]), "+f"((d)[27][3]), "+f"((d)[28][0]), "+f"((d)[28][1]), "+f"((d)[28][2]), \
      "+f"((d)[28][3]), "+f"((d)[29][0]), "+f"((d)[29][1]), "+f"((d)[29][2]), "+f"((d)[29][3]), \
      "+f"((d)[30][0]), "+f"((d)[30][1]), "+f"((d)[30][2]), "+f"((d)[30][3]), "+f"((d)[31][0]), \
      "+f"((d)[31][1]), "+f"((d)[31][2]), "+f"((d)[31][3])

namespace inflight::kernels::cuda::detail {

// Descriptor of a K-major or MN-major operand laid out in 128-byte swizzle atoms (8 rows of 128
// bytes, 1024-byte aligned). Byte offsets: lbo between atoms along the leading dimension (MN-major
// only), sbo between groups of 8 rows. Adding (bytes >> 4) to a descriptor moves its start.
__device__ __forceinline__ std::uint64_t SwizzledSmemDesc(std::uint32_t smem_addr,
                                                          std::uint32_t lbo, std::uint32_t sbo) {
  return static_cast<std::uint64_t>((smem_addr & 0x3ffff) >> 4) |
         (static_cast<std::uint64_t>((lbo & 0x3ffff) >> 4) << 16) |
         (static_cast<std::uint64_t>((sbo & 0x3ffff) >> 4) << 32) | (std::uint64_t{1} << 62);
}

// desc moved on by `units` 16-byte units. The start address (bits 0-13) is below 2^14 for any
// shared-memory address, so the move never carries out of the low word: a 32-bit add, which
// keeps the high word a constant the compiler need not recompute.
__device__ __forceinline__ std::uint64_t SmemDescPlus(std::uint64_t desc, std::uint32_t units) {
  return (desc & 0xffffffff00000000ull) | (static_cast<std::uint32_t>(desc) + units);
}

// Orders shared-memory data seen through the generic proxy (cp.async writes included) before this
// thread's later async-proxy reads (wgmma): run after the barrier that made the writes visible.
__device__ __forceinline__ void FenceProxyAsyncShared() {
#if INFLIGHT_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void WgmmaFence() {
#if INFLIGHT_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void WgmmaCommit() {
#if INFLIGHT_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
#if INFLIGHT_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Keeps the compiler from moving accumulator registers across the asynchronous window between a
// wgmma's issue and its wait (the hardware writes them in between).
template <int kFrags>
__device__ __forceinline__ void PinAccumulators(float (&d)[kFrags][4]) {
#pragma unroll
  for (int i = 0; i < kFrags; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

// The same for A fragments in registers: an RS wgmma reads them asynchronously, so they must stay
// live and unmoved until its wait.
template <int kFrags>
__device__ __forceinline__ void PinFragments(std::uint32_t (&a)[kFrags][4]) {
#pragma unroll
  for (int i = 0; i < kFrags; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
}

// mbarriers (PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier"): a
// 64-bit shared-memory word counting arrivals of the current phase; a waiter names the parity of
// the phase it waits for. A fresh barrier is in phase 0, so a wait on parity 1 returns at once (the
// producer's first pass over an empty stage).
__device__ __forceinline__ void MbarrierInit(std::uint32_t bar, int count) {
#if INFLIGHT_HAS_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  (void)bar, (void)count;
#endif
}

__device__ __forceinline__ void MbarrierArrive(std::uint32_t bar) {
#if INFLIGHT_HAS_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
#endif
}

// One arrival on bar once every cp.async this thread issued before has landed; the barrier's count
// includes it (noinc).
__device__ __forceinline__ void CpAsyncMbarrierArrive(std::uint32_t bar) {
#if INFLIGHT_HAS_WGMMA
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
#endif
}

__device__ __forceinline__ void MbarrierWait(std::uint32_t bar, int parity) {
#if INFLIGHT_HAS_WGMMA
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  (void)bar, (void)parity;
#endif
}

// Makes initialised mbarriers visible to the async proxy (the tensor copies that complete on them).
__device__ __forceinline__ void FenceMbarrierInit() {
#if INFLIGHT_HAS_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// This thread's arrival on bar, announcing `bytes` more that asynchronous copies will deliver to
// the current phase before it can complete.
__device__ __forceinline__ void MbarrierArriveExpectTx(std::uint32_t bar, std::uint32_t bytes) {
#if INFLIGHT_HAS_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#else
  (void)bar, (void)bytes;
#endif
}

// `bytes` (a multiple of 16) from global memory at src (16-byte aligned) into shared memory at dst
// with one TMA bulk copy, completing its bytes on bar (PTX ISA, "cp.async.bulk").
__device__ __forceinline__ void BulkCopyToShared(std::uint32_t dst, const void* src,
                                                 std::uint32_t bytes, std::uint32_t bar) {
#if INFLIGHT_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#else
  (void)dst, (void)src, (void)bytes, (void)bar;
#endif
}

// One box of a 2D tensor map (a __grid_constant__ kernel parameter) at element coordinates
// (inner, outer) into shared memory at dst, completing its bytes on bar. Elements outside the
// tensor arrive as zeros and still count.
__device__ __forceinline__ void TmaLoad2d(std::uint32_t dst, const void* tensor_map, int inner,
                                          int outer, std::uint32_t bar) {
#if INFLIGHT_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(tensor_map)), "r"(inner), "r"(outer), "r"(bar)
      : "memory");
#else
  (void)dst, (void)tensor_map, (void)inner, (void)outer, (void)bar;
#endif
}

// The same box written at dst (a CTA-relative offset) in every CTA of the cluster named in
// cta_mask, each completing its bytes on its own barrier at bar.
__device__ __forceinline__ void TmaLoad2dMulticast(std::uint32_t dst, const void* tensor_map,
                                                   int inner, int outer, std::uint32_t bar,
                                                   std::uint16_t cta_mask) {
#if INFLIGHT_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
      "cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(tensor_map)), "r"(inner), "r"(outer), "r"(bar),
      "h"(cta_mask)
      : "memory");
#else
  (void)dst, (void)tensor_map, (void)inner, (void)outer, (void)bar, (void)cta_mask;
#endif
}

__device__ __forceinline__ std::uint32_t ClusterCtaRank() {
  std::uint32_t rank = 0;
#if INFLIGHT_HAS_WGMMA
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
#endif
  return rank;
}

// One arrival on the barrier at CTA-relative offset bar in cluster CTA `rank` (this one included).
// NOTE: CTA-scope release (the default), as for a local arrival: it orders this thread's reads of
// the stage, which is all the producer needs. A cluster-scope release waits for every earlier
// memory operation of the thread to reach the cluster, and made the GEMM ~30% slower.
__device__ __forceinline__ void MbarrierArriveCluster(std::uint32_t bar, std::uint32_t rank) {
#if INFLIGHT_HAS_WGMMA
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
#else
  (void)bar, (void)rank;
#endif
}

// Every thread of every CTA in the cluster: writes before it are seen after it.
__device__ __forceinline__ void ClusterSync() {
#if INFLIGHT_HAS_WGMMA
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
#endif
}

__device__ __forceinline__ void PrefetchTensorMap(const void* tensor_map) {
#if INFLIGHT_HAS_WGMMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(tensor_map))
               : "memory");
#else
  (void)tensor_map;
#endif
}

// 16 bytes from / to a shared-memory address (a 32-bit shared-window address, as the descriptors
// and barriers above take).
__device__ __forceinline__ uint4 LoadShared128(std::uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

__device__ __forceinline__ void StoreShared128(std::uint32_t addr, const uint4& v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

// Named barrier `id` (1-15; 0 is __syncthreads) over `threads` threads.
__device__ __forceinline__ void NamedBarrierSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Hands registers between warpgroups (all warps of a warpgroup execute it): the loading warpgroup
// gives back what the computing ones take.
template <int kRegs>
__device__ __forceinline__ void SetMaxRegistersDecrease() {
#if INFLIGHT_HAS_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

template <int kRegs>
__device__ __forceinline__ void SetMaxRegistersIncrease() {
#if INFLIGHT_HAS_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// d (+)= A B for a 64 x N tile: A 64 x 16 and B 16 x N both K-major in shared memory. accumulate 0
// overwrites d. Each warp w of the warpgroup holds rows 16 w .. 16 w + 15 of d in the mma.sync
// m16n8 accumulator layout, n8 fragment i in d[i].
template <typename T, int N>
__device__ __forceinline__ void WgmmaSS(float (&d)[N / 8][4], std::uint64_t desc_a,
                                        std::uint64_t desc_b, int accumulate) {
  static_assert(N == 64 || N == 128 || N == 256, "N: 64, 128 or 256");
#if INFLIGHT_HAS_WGMMA
  if constexpr (N == 256 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " INFLIGHT_WGMMA_ACC128_REGS
        ", %128, %129, p, 1, 1, 0, 0;\n}\n"
        : INFLIGHT_WGMMA_ACC128_OPERANDS(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else if constexpr (N == 256) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " INFLIGHT_WGMMA_ACC128_REGS
        ", %128, %129, p, 1, 1, 0, 0;\n}\n"
        : INFLIGHT_WGMMA_ACC128_OPERANDS(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else if constexpr (N == 64 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " INFLIGHT_WGMMA_ACC32_REGS
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : INFLIGHT_WGMMA_ACC32_OPERANDS(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " INFLIGHT_WGMMA_ACC32_REGS
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : INFLIGHT_WGMMA_ACC32_OPERANDS(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " INFLIGHT_WGMMA_ACC64_REGS
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : INFLIGHT_WGMMA_ACC64_OPERANDS(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " INFLIGHT_WGMMA_ACC64_REGS
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : INFLIGHT_WGMMA_ACC64_OPERANDS(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
#endif
}

// d (+)= A B for a 64 x 256 tile of E4M3 codes: A 64 x 32 and B 32 x 256, both K-major in shared
// memory (8-bit operands have no transposed form; a k step is 32 bytes, as WgmmaSS's k16 of 16-bit
// elements). Fragments as WgmmaSS's.
__device__ __forceinline__ void WgmmaSSE4M3N256(float (&d)[32][4], std::uint64_t desc_a,
                                                std::uint64_t desc_b, int accumulate) {
#if INFLIGHT_HAS_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " INFLIGHT_WGMMA_ACC128_REGS
      ", %128, %129, p, 1, 1;\n}\n"
      : INFLIGHT_WGMMA_ACC128_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
#endif
}

// d (+)= A B for a 64 x N tile: A 64 x 16 from registers (each warp's 16 rows in the mma.sync
// m16k16 A fragment layout), B 16 x N MN-major in shared memory.
template <typename T, int N>
__device__ __forceinline__ void WgmmaRS(float (&d)[N / 8][4], const std::uint32_t (&a)[4],
                                        std::uint64_t desc_b, int accumulate) {
  static_assert(N == 64 || N == 128, "N: 64 or 128");
#if INFLIGHT_HAS_WGMMA
  if constexpr (N == 64 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " INFLIGHT_WGMMA_ACC32_REGS
        ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : INFLIGHT_WGMMA_ACC32_OPERANDS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " INFLIGHT_WGMMA_ACC32_REGS
        ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : INFLIGHT_WGMMA_ACC32_OPERANDS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " INFLIGHT_WGMMA_ACC64_REGS
        ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : INFLIGHT_WGMMA_ACC64_OPERANDS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " INFLIGHT_WGMMA_ACC64_REGS
        ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : INFLIGHT_WGMMA_ACC64_OPERANDS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  }
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
#endif
}

}  // namespace inflight::kernels::cuda::detail

#undef INFLIGHT_WGMMA_ACC32_REGS
#undef INFLIGHT_WGMMA_ACC32_OPERANDS
#undef INFLIGHT_WGMMA_ACC64_REGS
#undef INFLIGHT_WGMMA_ACC64_OPERANDS
#undef INFLIGHT_WGMMA_ACC128_REGS
#undef INFLIGHT_WGMMA_ACC128_OPERANDS
#undef INFLIGHT_HAS_WGMMA
