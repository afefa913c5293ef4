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
// device_sampling set gets its next token and that token's log-probability chosen by the runner
// from the last token's logits row, with every rule of the host sampler (executor/sampling/
// sampler.h: embedding bias, temperature, repetition / presence / frequency penalties, bans, greedy
// or top-k / top-p and the Philox draw); that row then never leaves the device. The executor
// sends, per step, only what is small (DeviceSampling: the penalty and ban lists are O(sequence
// length)) and the embedding bias by a handle the runner caches on the device. It sets `logits`
// to kNone for such a sequence, so it contributes no rows to StepOutput::logits; requests that
// return generation logits stay on the host.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "inflight/types.h"
#include "model/activation_amax.h"
#include "model/collectives.h"
#include "model/engine_config.h"

namespace inflight::model {

// How the runner picks the token after tokens.back(), reproducing sampling::Sample for this step
// (same stage order and float operations, same draw, same log-probability rule).
struct DeviceSampling {
  bool greedy = false;           // argmax of the processed row, lowest id on ties
  float temperature = 1.0f;      // applied when > 0 and != 1, greedy included (logits_processors.h)
  std::int32_t top_k = 0;        // sampled rows: <= 0 off
  float top_p = 0.0f;            // sampled rows: <= 0 or >= 1 off
  std::uint64_t seed = 0;        // the request's Philox stream ...
  std::uint64_t draw_index = 0;  // ... and the draw for this token: PhiloxUniform(seed, draw_index)
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;    // 0: off
  float frequency_penalty = 0.0f;   // 0: off
  // The distinct tokens the penalties touch, each once, with how often it was generated (0: only in
  // the prompt): prompt ++ generated when repetition_penalty != 1, else the generated tokens only.
  std::vector<TokenIdType> penalty_tokens;
  std::vector<std::int32_t> penalty_counts;  // same length as penalty_tokens
  // Ids set to -inf after the penalties: bad words whose prefix ends the sequence, and end_id
  // while min_tokens is not reached.
  std::vector<TokenIdType> banned_tokens;
  // [vocab_size] values added first; null: none. The same object for every step of a request (the
  // executor owns it until the request ends), so the runner may keep one device copy per object
  // for as long as the object lives.
  std::shared_ptr<const std::vector<float>> embedding_bias;
  // Sampled rows: the log-probability in the truncated, renormalised distribution (true) or the
  // log-softmax before truncation (false); ExecutorConfig::normalize_log_probs.
  bool normalize_log_probs = true;
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
  // Lookahead (ModelRunner::supports_lookahead): >= 0 when `tokens` is one decode token whose value
  // the host does not know yet: the token the runner samples on the device for sequence
  // `previous_step_row` of the step launched just before this one (which had device_sampling). The
  // runner reads it on the device; tokens[0] is a placeholder. -1: `tokens` are as given.
  std::int32_t previous_step_row = -1;
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
  // sequence order: the sampled token and its log-probability (sampler.h's rule), or -1 and NaN for
  // a sequence without device_sampling. A row that cannot be sampled (sampler.h's kInternal
  // errors) gives kSampledNotFinite or kSampledAllBanned and NaN.
  std::vector<TokenIdType> sampled_tokens;
  std::vector<float> sampled_log_probs;
  static constexpr TokenIdType kSampledNotFinite = -2;  // a processed logit is NaN or +inf
  static constexpr TokenIdType kSampledAllBanned = -3;  // every token is banned
  // Milliseconds the host spent blocked on the device in this step (0 for the CPU runner), which
  // tells host work the device waits for from device work (executor/step_profile.h).
  double device_wait_ms = 0;
  // Milliseconds from the step's first device work to its last (CUDA events; 0 for the CPU
  // runner): when it falls short of the step's wall time, the device sat idle for the rest.
  double device_ms = 0;
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
  // A split engine (RunnerOptions::collectives with tp_size x pp_size > 1): every rank of the
  // group calls Step with the same StepInput, in the same order (the leader broadcasts it); the
  // ranks meet in the step's collectives, so a rank that skips a step stalls the others. The
  // StepOutput is complete (logits, row_begin, vocab_size, sampled_tokens / sampled_log_probs) on
  // every rank of the first pipeline stage, group rank 0 (tp 0 of stage 0) included: with pp > 1
  // the last stage sends it there (Collectives::SendToFirstStage). The last stage's ranks return
  // it complete too; a stage in between returns row_begin and vocab_size with empty logits and
  // sampled values. A step that fails validation fails on every rank alike, before any collective.
  virtual Result<StepOutput> Step(const StepInput& input) = 0;
  // Whether Step honours SequenceStep::device_sampling (see the top of this file).
  virtual bool supports_device_sampling() const { return false; }

  // Micro-batches in flight (pipeline parallelism): Launch starts a step and returns once this
  // process's part of it is done or queued; Complete returns the oldest launched step's output.
  // Up to max_steps_in_flight() steps may be launched before the oldest is completed, so that
  // stage s computes one micro-batch while stage s + 1 computes the one before (docs/multi_gpu.md,
  // "Pipeline parallelism: micro-batches in flight"). The same rules as Step: every rank of a split
  // engine launches the same steps in the same order (Step is Launch then Complete); a step that
  // Launch refuses (validation, before any collective) is not in flight and has nothing to
  // complete. The default runs the whole step in Launch: one in flight.
  virtual std::int32_t max_steps_in_flight() const { return 1; }
  // Lookahead on one process: true when the runner accepts one Launch more while a step is in
  // flight (at most two launched and not completed, completed oldest first), and that step's
  // sequences may take their token from the step launched just before it
  // (SequenceStep::previous_step_row). So the executor launches step N + 1 before step N's tokens
  // are back and the host's work between steps overlaps the device's. A row of step N the device
  // could not sample (kSampledNotFinite, kSampledAllBanned) gives step N + 1 some valid token: the
  // executor discards that sequence's work. Independent of max_steps_in_flight (micro-batches).
  virtual bool supports_lookahead() const { return false; }
  // The fewest sequences a step in flight needs for the executor to look it ahead. A request that
  // arrives while step N runs joins step N + 2 instead of N + 1 (one step more to its first token),
  // while what lookahead hides, the host's work between steps, grows with the batch: small steps
  // are not worth that.
  virtual std::int32_t lookahead_min_sequences() const { return 1; }
  virtual Status Launch(const StepInput& input) {
    launched_.push_back(Step(input));
    return Status::Ok();
  }
  virtual Result<StepOutput> Complete() {
    if (launched_.empty()) return Internal("ModelRunner::Complete without a launched step");
    Result<StepOutput> out = std::move(launched_.front());
    launched_.pop_front();
    return out;
  }

 private:
  std::deque<Result<StepOutput>> launched_;  // the default Launch's results
};

// The runtime's limits on attention (TensorRT-LLM's max_attention_window_size and
// sink_token_length), which each runner combines with the engine's own windows
// (model/attention_windows.h).
struct AttentionLimits {
  // Per layer, the most keys a query attends (itself included), repeated over the layers when
  // shorter than num_layers; each >= 1. Empty: max_seq_len (no limit).
  std::vector<std::int32_t> max_attention_window;
  // Of a limited layer's keys, this many are the sequence's first (attention sinks); >= 0.
  std::int32_t sink_token_length = 0;
};

struct RunnerOptions {
  // KV pool size: at most max_kv_tokens tokens (rounded down to whole blocks).
  std::int64_t max_kv_tokens = 0;
  int num_threads = 0;  // CPU: 0 = hardware concurrency
  // This process's tensor- and pipeline-parallel group (collectives.h; over processes:
  // mpi_collectives.h); its sizes must equal the engine's tp_size and pp_size, and its ranks pick
  // the rank file. Null: one process runs the whole engine (tp 1, pp 1). See ModelRunner::Step for
  // how the group's ranks step together.
  std::shared_ptr<Collectives> collectives;
  AttentionLimits attention_limits;
  // CPU runner, calibration (model/fp8_calibration.h): every step's activations are folded into
  // it (resized to the engine's layers when empty). Null: nothing is observed.
  std::shared_ptr<ActivationAmax> observe_amax;
};

// Loads <engine_dir>/config.json and the weights of the group's rank (rank0.safetensors for one
// process) into a CPU runner (fp32 math).
Result<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const std::string& engine_dir,
                                                          const RunnerOptions& options);

}  // namespace inflight::model
