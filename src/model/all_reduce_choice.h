// Which transport sums a tensor-parallel all-reduce on the GPU: NCCL, or our one-shot / two-shot
// all-reduce over CUDA IPC peer memory (kernels/cuda/ipc_all_reduce.h) for small messages, where
// NCCL's fixed latency dominates. Host logic only, so the rule is tested on the CPU.
#pragma once

#include <cstdint>
#include <string>

#include "inflight/status.h"

namespace inflight::model {

// INFLIGHT_ALLREDUCE (or NcclCollectivesOptions::all_reduce):
//   auto         (default) IPC below the size thresholds, NCCL above, NCCL where peer memory is
//                not usable
//   nccl         always NCCL
//   ipc          IPC for every message that fits its buffer (one- or two-shot by size), else NCCL
//   ipc_oneshot  / ipc_twoshot: IPC with that algorithm for every message that fits (tests, bench)
enum class AllReduceMode { kAuto, kNccl, kIpc, kIpcOneShot, kIpcTwoShot };

// `value` null or empty: kAuto (verified on two H200s:
// bench/results/2026-11-29-h200x2-device-rounds.md).
// `source` names where the value came from, for the error.
Result<AllReduceMode> ParseAllReduceMode(const char* value, const std::string& source);
const char* AllReduceModeName(AllReduceMode mode);

enum class AllReducePath { kNccl, kIpcOneShot, kIpcTwoShot };
const char* AllReducePathName(AllReducePath path);

struct AllReduceThresholds {
  // auto: IPC up to this many bytes. NCCL's ring reaches NVLink bandwidth on large messages, where
  // IPC's extra copy into the shared buffer stops paying. Default 8 MiB (the buffer's default).
  std::int64_t ipc_max_bytes = std::int64_t{8} << 20;
  // auto and ipc: one-shot up to this many bytes with more than two ranks, two-shot above it.
  // With two ranks both read the same bytes, and one-shot has one barrier instead of two, so two
  // ranks always take one-shot. Default 256 KiB.
  std::int64_t one_shot_max_bytes = std::int64_t{256} << 10;
};

// What sums a message of `bytes` over `num_ranks` ranks. `ipc_capacity_bytes`: the largest
// message the IPC buffers take (0: IPC not available on this group); `aligned`: the buffer is
// 16-byte aligned (the IPC kernels' vector accesses). Every rank must get the same answer for the
// same call, so the inputs must be the same on every rank (the capacity is agreed at creation).
AllReducePath ChooseAllReducePath(AllReduceMode mode, std::int64_t bytes, int num_ranks,
                                  std::int64_t ipc_capacity_bytes, bool aligned,
                                  const AllReduceThresholds& thresholds = {});

}  // namespace inflight::model
