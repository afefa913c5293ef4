// Register-level building blocks of the decode attention kernel: streaming 4/8/16-byte loads, an L2
// bulk prefetch, the m16n8k16 tensor-core product in fp16 and bf16, the 8x8 register transpose, and
// splitting registers into their low and high halves. (Packing fp32 pairs is cuda_common.cuh's
// PackPair.)
//
// Fragment layouts are those of the PTX ISA ("Matrix Fragments for mma.m16n8k16 with floating point
// type", "movmatrix"): lane = 4 * group + quad, where group = lane / 4 picks a row of A and C and a
// column of B, and quad = lane % 4 picks the pair of columns 2 * quad, 2 * quad + 1 (of A and C) or
// of rows (of B). A: {a0 (row g, k 2q..), a1 (row g + 8), a2 (row g, k 2q + 8..), a3 (row g + 8, k
// 2q + 8..)}; B: {b0 (k 2q.., col g), b1 (k 2q + 8.., col g)}; C: {c0, c1 (row g, cols 2q, 2q + 1),
// c2, c3 (row g + 8)}. A 32-bit register holds the lower k (or column) in its low half.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/paged_attention_context_ptx.cuh"

namespace inflight::kernels::cuda::detail {

// Loads of data read exactly once (the KV cache): kept out of L1 so that they do not evict what is
// reused (block tables, the query).
__device__ __forceinline__ uint4 LoadStream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Asks L2 for `bytes` (a multiple of 16) from the 16-byte aligned `p` with one TMA bulk prefetch:
// nothing comes back to the SM, so a block can put a whole split's reads in flight at once. A no-op
// below sm_90.
__device__ __forceinline__ void PrefetchL2(const void* p, std::uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ uint2 LoadStream8(const void* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(p));
  return v;
}

__device__ __forceinline__ std::uint32_t LoadStream4(const void* p) {
  std::uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// c += a * b over one 16x8x16 tile, fp32 accumulate: the context kernels' product
// (paged_attention_context_ptx.cuh) with A's four registers passed one by one.
template <typename T>
__device__ __forceinline__ void MmaM16N8K16(float (&c)[4], std::uint32_t a0, std::uint32_t a1,
                                            std::uint32_t a2, std::uint32_t a3, std::uint32_t b0,
                                            std::uint32_t b1) {
  const std::uint32_t a[4] = {a0, a1, a2, a3};
  MmaM16N8K16<T>(c, a, b0, b1);
}

// The fragment of the transpose of the 8x8 matrix whose fragment (row lane / 4, columns 2 * (lane %
// 4) + {0, 1}) each lane passes in.
__device__ __forceinline__ std::uint32_t Transpose8x8(std::uint32_t fragment) {
  std::uint32_t t;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(t) : "r"(fragment));
  return t;
}

// Low halves of x and y in one register (x's in the low half), and the high halves likewise.
__device__ __forceinline__ std::uint32_t LowHalves(std::uint32_t x, std::uint32_t y) {
  return __byte_perm(x, y, 0x5410);
}
__device__ __forceinline__ std::uint32_t HighHalves(std::uint32_t x, std::uint32_t y) {
  return __byte_perm(x, y, 0x7632);
}

}  // namespace inflight::kernels::cuda::detail
