#include "kernels/cuda/ipc_all_reduce.h"

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// System-scope acquire / release: the flags are written by one GPU and read by another over
// NVLink, and must order the data written before them (PTX ISA, "Memory Consistency Model").
__device__ __forceinline__ std::uint32_t LoadAcquire(const std::uint32_t* p) {
  std::uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreRelease(std::uint32_t* p, std::uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Block b of every rank meets here: each rank's thread t announces `value` to rank t, then waits
// until rank t has announced at least `value` to it. Values only grow (modulo 2^32: compared as a
// signed difference); a peer may be ahead, never more than two barriers. Precondition: every
// thread of the block calls it (the __syncthreads on both sides order the block's data accesses
// around the flags).
__device__ __forceinline__ void BlockBarrier(const IpcPeers& p, std::uint32_t value) {
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  if (t < p.num_ranks) {
    auto* peer = static_cast<IpcSignals*>(p.areas[t]);
    StoreRelease(&peer->arrived[blockIdx.x][p.rank], value);
    const std::uint32_t* mine =
        &static_cast<const IpcSignals*>(p.areas[p.rank])->arrived[blockIdx.x][t];
    for (std::uint32_t polls = 1; static_cast<std::int32_t>(LoadAcquire(mine) - value) < 0;
         ++polls) {
      // NOTE: the host sets *abort when the group gives up on a dead peer; without it a block
      // would spin forever and the stream would never drain.
      if ((polls & 1023u) == 0 && *p.abort != 0) break;
    }
  }
  __syncthreads();
}

template <typename T>
inline constexpr int kPackElems = 16 / static_cast<int>(sizeof(T));

// Pack `pk` (16 bytes) of x[count]; the last pack may be partial (zero-filled).
template <typename T>
__device__ __forceinline__ uint4 LoadInput(const T* x, std::int64_t pk, std::int64_t count) {
  constexpr int E = kPackElems<T>;
  const std::int64_t first = pk * E;
  if (first + E <= count) return reinterpret_cast<const uint4*>(x)[pk];
  uint4 v = make_uint4(0, 0, 0, 0);
  T* e = reinterpret_cast<T*>(&v);
  for (int i = 0; i < E && first + i < count; ++i) e[i] = x[first + i];
  return v;
}

template <typename T>
__device__ __forceinline__ void StoreOutput(T* x, std::int64_t pk, std::int64_t count, uint4 v) {
  constexpr int E = kPackElems<T>;
  const std::int64_t first = pk * E;
  if (first + E <= count) {
    reinterpret_cast<uint4*>(x)[pk] = v;
    return;
  }
  const T* e = reinterpret_cast<const T*>(&v);
  for (int i = 0; i < E && first + i < count; ++i) x[first + i] = e[i];
}

// acc = (or +=) every element of a rank's pack; peers' memory is read past L1 (ld.global.cg).
// NOTE: the first rank's values are taken, not added to 0, so that the sum is the ranks' values
// added in rank order exactly (0 + -0 would turn a negative zero positive).
template <typename T, bool kAdd>
__device__ __forceinline__ void AccumulatePack(float (&acc)[kPackElems<T>], const uint4* src) {
  const uint4 v = __ldcg(src);
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < kPackElems<T>; ++i) acc[i] = kAdd ? acc[i] + ToFloat(e[i]) : ToFloat(e[i]);
}

template <typename T>
__device__ __forceinline__ uint4 RoundPack(const float (&acc)[kPackElems<T>]) {
  uint4 v;
  T* e = reinterpret_cast<T*>(&v);
#pragma unroll
  for (int i = 0; i < kPackElems<T>; ++i) e[i] = FromFloat<T>(acc[i]);
  return v;
}

// Rank r's region `which` (0: in, 1: out) of this call's parity.
__device__ __forceinline__ uint4* Region(const IpcPeers& p, int r, std::uint32_t parity,
                                         int which) {
  return reinterpret_cast<uint4*>(static_cast<char*>(p.areas[r]) + kIpcSignalBytes +
                                  (2 * static_cast<std::int64_t>(parity) + which) *
                                      p.capacity_bytes);
}

// acc = the fp32 sum over the ranks of pack `pk` of their region `which`, in rank order.
template <typename T>
__device__ __forceinline__ void SumPacks(float (&acc)[kPackElems<T>], const IpcPeers& p,
                                         std::uint32_t parity, int which, std::int64_t pk) {
  AccumulatePack<T, false>(acc, Region(p, 0, parity, which) + pk);
  for (int r = 1; r < p.num_ranks; ++r)
    AccumulatePack<T, true>(acc, Region(p, r, parity, which) + pk);
}

// Grid: (blocks <= kIpcMaxBlocks), Block: (kThreads). Thread i of the grid handles packs i,
// i + grid size, ... (one-shot: of the whole message; two-shot: of each rank's slice), the same on
// every rank, which is why per-block barriers suffice. Summation in rank order in fp32.
template <typename T, bool kTwoShot>
__global__ void __launch_bounds__(kThreads)
    IpcAllReduceKernel(IpcPeers p, T* inout, std::int64_t count) {
  constexpr int E = kPackElems<T>;
  const std::int64_t packs = (count + E - 1) / E;
  const int n = p.num_ranks;
  IpcCounters* counters = p.counters;
  std::uint32_t barrier = counters->barriers[blockIdx.x];
  const std::uint32_t parity = counters->calls & 1u;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  uint4* my_in = Region(p, p.rank, parity, 0);
  if constexpr (!kTwoShot) {
    for (std::int64_t pk = first; pk < packs; pk += stride) my_in[pk] = LoadInput(inout, pk, count);
    BlockBarrier(p, ++barrier);
    for (std::int64_t pk = first; pk < packs; pk += stride) {
      float acc[E];
      SumPacks<T>(acc, p, parity, 0, pk);
      StoreOutput(inout, pk, count, RoundPack<T>(acc));
    }
  } else {
    const std::int64_t slice = (packs + n - 1) / n;
    for (std::int64_t i = first; i < slice; i += stride) {
      for (int r = 0; r < n; ++r) {
        const std::int64_t pk = r * slice + i;
        if (pk < packs) my_in[pk] = LoadInput(inout, pk, count);
      }
    }
    BlockBarrier(p, ++barrier);
    uint4* my_out = Region(p, p.rank, parity, 1);
    for (std::int64_t i = first; i < slice; i += stride) {
      const std::int64_t pk = p.rank * slice + i;
      if (pk >= packs) break;
      float acc[E];
      SumPacks<T>(acc, p, parity, 0, pk);
      my_out[pk] = RoundPack<T>(acc);
    }
    BlockBarrier(p, ++barrier);
    for (std::int64_t i = first; i < slice; i += stride) {
      for (int r = 0; r < n; ++r) {
        const std::int64_t pk = r * slice + i;
        if (pk < packs) StoreOutput(inout, pk, count, __ldcg(Region(p, r, parity, 1) + pk));
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    counters->barriers[blockIdx.x] = barrier;
    __threadfence();
    // The last block to finish moves the call on: every block has read `calls` by then.
    if (atomicAdd(&counters->blocks_done, 1u) == gridDim.x - 1) {
      counters->blocks_done = 0;
      counters->calls += 1;
    }
  }
}

template <typename T>
cudaError_t Launch(const IpcPeers& p, void* inout, std::int64_t count,
                   IpcAllReduceAlgorithm algorithm, cudaStream_t stream) {
  constexpr int E = kPackElems<T>;
  const std::int64_t packs = (count + E - 1) / E;
  const std::int64_t work = algorithm == IpcAllReduceAlgorithm::kTwoShot
                                ? (packs + p.num_ranks - 1) / p.num_ranks
                                : packs;
  std::int64_t blocks = (work + kThreads - 1) / kThreads;
  if (blocks > kIpcMaxBlocks) blocks = kIpcMaxBlocks;
  if (blocks < 1) blocks = 1;
  auto* x = static_cast<T*>(inout);
  if (algorithm == IpcAllReduceAlgorithm::kTwoShot) {
    IpcAllReduceKernel<T, true>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p, x, count);
  } else {
    IpcAllReduceKernel<T, false>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p, x, count);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t IpcAllReduce(const IpcPeers& peers, void* inout, std::int64_t count, DType dtype,
                         IpcAllReduceAlgorithm algorithm, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (count < 0 || peers.num_ranks < 2 || peers.num_ranks > kIpcMaxRanks || peers.rank < 0 ||
      peers.rank >= peers.num_ranks || peers.counters == nullptr || peers.abort == nullptr ||
      peers.capacity_bytes % 16 != 0 || reinterpret_cast<std::uintptr_t>(inout) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  for (int r = 0; r < peers.num_ranks; ++r) {
    if (peers.areas[r] == nullptr) return cudaErrorInvalidValue;
  }
  const std::int64_t bytes = count * static_cast<std::int64_t>(DTypeSize(dtype));
  if (bytes > peers.capacity_bytes) return cudaErrorInvalidValue;
  switch (dtype) {
    case DType::kFloat32:
      return Launch<float>(peers, inout, count, algorithm, stream);
    case DType::kFloat16:
      return Launch<__half>(peers, inout, count, algorithm, stream);
    case DType::kBFloat16:
      return Launch<__nv_bfloat16>(peers, inout, count, algorithm, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace inflight::kernels::cuda
