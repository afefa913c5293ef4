// The leader's messages to its followers in a multi-process engine (leader_runner.h): each step's
// StepInput as bytes, and the stop at the end.
//
//   message := kind:u8  (kStep | kStop)
//              kStep: retired_bias_ids:vec<u64>  num_sequences:u32  sequence*
//   sequence := seq_id:i64 num_cached:i32 logits:u8 tokens:vec<i32> block_table:vec<i32>
//               has_device_sampling:u8 [device_sampling]
//   vec<T>   := count:u32 T*
//
// Every field of SequenceStep and DeviceSampling travels, so a follower's Step sees what the
// leader's sees. Numbers are in the host's byte order: every rank runs the same build.
//
// Embedding biases ([vocab] floats, the same object for every step of a request) travel once per
// object: the leader's EmbeddingBiasSender numbers each object it sends, sends its values the first
// time and only the number afterwards, and retires the number when the object is gone; the
// follower's EmbeddingBiasReceiver keeps one object per number, so a runner that caches the bias
// on the device per object (model_runner.h) uploads it once on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inflight/status.h"
#include "model/model_runner.h"

namespace inflight::model {

enum class LeaderMessageKind : std::uint8_t { kStep = 1, kStop = 2 };

class EmbeddingBiasSender {
 public:
  struct Entry {
    std::weak_ptr<const std::vector<float>> object;
    const std::vector<float>* address = nullptr;
    std::uint64_t id = 0;
  };
  // The number of `bias`, and whether this is its first appearance (its values must travel).
  std::pair<std::uint64_t, bool> IdOf(const std::shared_ptr<const std::vector<float>>& bias);
  // Numbers of objects that no longer exist, forgotten here; the follower drops them too.
  std::vector<std::uint64_t> TakeRetired();
  std::size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
  std::uint64_t next_id_ = 1;
};

class EmbeddingBiasReceiver {
 public:
  std::unordered_map<std::uint64_t, std::shared_ptr<const std::vector<float>>> objects;
};

// A kStep message for `input`.
std::string EncodeStep(const StepInput& input, EmbeddingBiasSender& biases);
// The kStop message.
std::string EncodeStop();

struct LeaderMessage {
  LeaderMessageKind kind = LeaderMessageKind::kStop;
  StepInput step;  // kStep only
};

// Parses a message of EncodeStep / EncodeStop. Errors: a truncated or malformed message, or a bias
// number the receiver was never sent.
Result<LeaderMessage> DecodeLeaderMessage(std::string_view bytes, EmbeddingBiasReceiver& biases);

// Orchestrator mode (mpi_orchestrator.h): the workers' StepOutput, from the group's rank 0 back to
// the server process, every field included.
std::string EncodeStepOutput(const StepOutput& output);
Result<StepOutput> DecodeStepOutput(std::string_view bytes);

}  // namespace inflight::model
