// All-reduce (sum) over the GPUs of one host through CUDA IPC peer memory, for messages small
// enough that NCCL's fixed latency dominates (a decode step's [batch, hidden] partial sums). The
// host side (model/ipc_all_reduce.h) allocates each rank's area, shares it with cudaIpc* handles
// and fills IpcPeers; this file only launches the kernels.
//
// Each rank's peer-visible area:
//   [ IpcSignals (kIpcSignalBytes) | parity 0: in [capacity] | out [capacity] | parity 1: ... ]
// Calls alternate between the two parities, so a rank may write its next input while a slower peer
// still reads the previous one: a rank that starts call k+2 has passed a barrier of call k+1 with
// every peer, whose stream had finished call k by then. Barriers are per block: block b of every
// rank handles the same elements, so block b waits only for block b of its peers. Barrier values
// come from counters in device memory that the kernels advance themselves, so a CUDA graph may
// replay a captured call any number of times; nothing on the host changes between calls.
//
//   one-shot: copy my input into my `in`; barrier; sum every rank's `in` (rank order, fp32,
//             rounded once: every rank gets the same bits).
//   two-shot: copy my input into my `in`; barrier; reduce my 1/N slice over every rank's `in` into
//             my `out` (rounded); barrier; gather every rank's `out` slice. Reads (N-1)/N of the
//             data twice instead of (N-1) times: better from 3 ranks and mid sizes on.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

inline constexpr int kIpcMaxRanks = 8;
inline constexpr int kIpcMaxBlocks = 32;

// Peer-visible: arrived[b][r] is the last barrier value rank r's block b announced to this rank.
struct IpcSignals {
  std::uint32_t arrived[kIpcMaxBlocks][kIpcMaxRanks];
};
inline constexpr std::int64_t kIpcSignalBytes = 4096;
static_assert(sizeof(IpcSignals) <= kIpcSignalBytes);

// This rank's own (not shared) progress: barriers passed per block, calls made (its parity picks
// the regions; the last block of a call to finish advances it) and that call's finished blocks.
struct IpcCounters {
  std::uint32_t barriers[kIpcMaxBlocks];
  std::uint32_t calls;
  std::uint32_t blocks_done;
};

struct IpcPeers {
  int rank = 0;
  int num_ranks = 0;  // 2 to kIpcMaxRanks
  // Every rank's area, mapped into this process (areas[rank] is this rank's own allocation).
  void* areas[kIpcMaxRanks] = {};
  IpcCounters* counters = nullptr;  // device memory, zeroed before the first call
  // Host-mapped flag; nonzero makes waiting blocks give up (the group aborted: a peer died).
  const volatile int* abort = nullptr;
  std::int64_t capacity_bytes = 0;  // of each in / out region; a multiple of 16
};

// Bytes of one rank's area for regions of `capacity_bytes`.
inline std::int64_t IpcAreaBytes(std::int64_t capacity_bytes) {
  return kIpcSignalBytes + 4 * capacity_bytes;
}

enum class IpcAllReduceAlgorithm { kOneShot, kTwoShot };

// In place: inout ([count] of dtype: float32, float16 or bfloat16; 16-byte aligned device memory)
// becomes the sum over the ranks. Every rank must make the same calls (same count, dtype and
// algorithm) in the same order. count * element size must be at most capacity_bytes.
// Graph-capturable: one kernel launch, no host synchronisation.
cudaError_t IpcAllReduce(const IpcPeers& peers, void* inout, std::int64_t count, DType dtype,
                         IpcAllReduceAlgorithm algorithm, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
