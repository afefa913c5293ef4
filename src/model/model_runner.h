// The narrow hand-off between the executor (which schedules) and the model (which computes).
//
// The executor decides, for each step, which sequences run and which of their tokens; the runner
// turns that into one forward pass over the paged KV cache and returns logits. The runner owns all
// device memory (weights, KV pools, activations); the executor never sees a device pointer.
//
//   sequence s:  [0 ......... num_cached) [num_cached ...... num_cached + tokens.size())
//                 already in the KV cache    computed (and written to the cache) this step
//   block_table covers every position of both ranges: position t is in
//   block_table[t / tokens_per_block].
//
// Device sampling (runners whose supports_device_sampling() is true): a sequence with
// device_sampling set gets its next token chosen by the runner from the last token's logits row,
// with the host sampler's rules (executor/sampling/sampler.h) restricted to temperature, top-k and
// top-p; that row then never leaves the device. The executor asks for it only when the request
// needs nothing else (no penalties, bad words, embedding bias, active min_tokens, logits or
// log-prob outputs) and sets `logits` to kNone, so such a sequence contributes no rows to
// StepOutput::logits.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "inflight/types.h"
#include "model/engine_config.h"

namespace inflight::model {

// How the runner picks the token after tokens.back(), reproducing sampling::Sample for this step.
struct DeviceSampling {
  bool greedy = false;           // argmax, lowest id on ties; the fields below are then unused
  float temperature = 1.0f;      // > 0
  std::int32_t top_k = 0;        // <= 0: off
  float top_p = 0.0f;            // <= 0 or >= 1: off
  std::uint64_t seed = 0;        // the request's Philox stream ...
  std::uint64_t draw_index = 0;  // ... and the draw for this token: PhiloxUniform(seed, draw_index)
};

struct SequenceStep {
  std::int64_t seq_id = 0;          // for logs
  std::vector<TokenIdType> tokens;  // new tokens: a prompt chunk, or the one token to decode
  std::int32_t num_cached = 0;      // position of tokens[0]
  std::vector<std::int32_t> block_table;
  // Which logits to return: none (a prompt chunk that is not the last), the last token's, or all.
  enum class Logits : std::uint8_t { kNone, kLast, kAll } logits = Logits::kLast;
  // Set: the runner samples the next token on the device (independently of `logits`). Only for
  // runners that support it.
  std::optional<DeviceSampling> device_sampling;
};

struct StepInput {
  std::vector<SequenceStep> sequences;
};

struct StepOutput {
  // Row-major [num_rows, vocab_size] in fp32; rows in sequence order: kLast gives 1 row, kAll gives
  // tokens.size() rows, kNone none. row_begin[i] is the first row of sequence i.
  std::vector<float> logits;
  std::vector<std::int32_t> row_begin;
  std::int64_t vocab_size = 0;
  // Device sampling: empty when no sequence had device_sampling; else one entry per sequence, in
  // sequence order: the sampled token and its log-probability, or -1 and NaN for a sequence without
  // device_sampling. A log-probability the runner does not compute is NaN too.
  std::vector<TokenIdType> sampled_tokens;
  std::vector<float> sampled_log_probs;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const EngineConfig& config() const = 0;
  // Number of KV blocks the runner allocated (every layer has this many).
  virtual std::int64_t num_kv_blocks() const = 0;
  virtual const char* device_name() const = 0;  // "cpu", "cuda:0"
  // Bytes held by the runner: weights + KV pools + workspace.
  virtual std::int64_t memory_bytes() const = 0;
  virtual Result<StepOutput> Step(const StepInput& input) = 0;
  // Whether Step honours SequenceStep::device_sampling (see the top of this file).
  virtual bool supports_device_sampling() const { return false; }
};

struct RunnerOptions {
  // KV pool size: at most max_kv_tokens tokens (rounded down to whole blocks).
  std::int64_t max_kv_tokens = 0;
  int num_threads = 0;  // CPU: 0 = hardware concurrency
};

// Loads <engine_dir>/config.json and rank0.safetensors into a CPU runner (fp32 math).
Result<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const std::string& engine_dir,
                                                          const RunnerOptions& options);

}  // namespace inflight::model
