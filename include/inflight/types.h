// Basic types shared by the public API and the implementation.
#pragma once

#include <cstdint>
#include <vector>

namespace inflight {

using IdType = std::uint64_t;      // request id assigned by the executor
using TokenIdType = std::int32_t;  // token id
using SizeType = std::int32_t;     // counts, lengths
using VecTokens = std::vector<TokenIdType>;
using BeamTokens = std::vector<VecTokens>;

// Why a sequence stopped. kNotFinished while it still runs.
enum class FinishReason : std::uint8_t { kNotFinished, kEndId, kStopWords, kLength, kCancelled };

enum class BatchingType : std::uint8_t {
  kStatic,    // gpt_model_type v1: a batch runs to completion before the next is admitted
  kInflight,  // inflight_batching / inflight_fused_batching
};

enum class CapacitySchedulerPolicy : std::uint8_t {
  kMaxUtilization,     // admit greedily, pause the newest requests when KV blocks run out
  kGuaranteedNoEvict,  // admit only when blocks for prompt + max new tokens are reserved
};

enum class DeviceKind : std::uint8_t { kAuto, kCuda, kCpu };

}  // namespace inflight
