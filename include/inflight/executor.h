// The executor: in-flight batching over a paged KV cache, in process.
//
// Usage:
//   auto ex = Executor::Create(engine_dir, ExecutorConfig{});      //
//   Result<std::unique_ptr<Executor>> Result<IdType> id = ex.value()->enqueueRequest(request); //
//   validation errors come back here for (Response& r :
//   ex.value()->awaitResponses(std::chrono::milliseconds(100))) { ... }
//
// Responses for one request arrive in order; exactly one of them has result.is_final (or carries an
// error). Thread-safe: enqueue, await, cancel and stats may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "inflight/types.h"

namespace inflight {

namespace model {
class ModelRunner;  // src/model/model_runner.h
}

// Sampling parameters of one request. Unset fields take the default named in the comment.
struct SamplingConfig {
  SizeType beam_width = 1;                  // 1; beam search (>1) is not supported yet
  std::optional<SizeType> top_k;            // unset or 0: no top-k limit; range [0, vocab]
  std::optional<float> top_p;               // unset or <= 0: off; else (0, 1]
  std::optional<float> temperature;         // 1.0; range [0, inf); 0 means greedy
  std::optional<float> repetition_penalty;  // 1.0 (off); range (0, inf)
  std::optional<float> presence_penalty;    // 0.0 (off)
  std::optional<float> frequency_penalty;   // 0.0 (off)
  std::optional<SizeType> min_tokens;       // 0; end_id and stop words are ignored before this many
  std::optional<std::uint64_t> seed;        // 0; same seed and inputs give the same output
  std::optional<float> length_penalty;      // beam search only; accepted and ignored for beam 1
  std::optional<bool> early_stopping;       // beam search only
  // Greedy when top_k == 1, or temperature == 0, or neither top_k (> 0) nor top_p (> 0) is set,
  // whatever the temperature (TensorRT-LLM's rule; sampling_config.cc).
  bool IsGreedy() const;
  Status Validate() const;  // names the field, its value and the accepted range
};

struct OutputConfig {
  bool return_log_probs = false;           // output_log_probs and cum_log_probs
  bool return_context_logits = false;      // logits of every prompt position
  bool return_generation_logits = false;   // logits of every generated position
  bool exclude_input_from_output = false;  // output_token_ids hold only generated tokens
};

struct Request {
  VecTokens input_token_ids;          // the prompt; 1 .. max_input_len tokens
  SizeType max_tokens = 0;            // new tokens to generate; >= 1
  bool streaming = false;             // a response per new token (only new tokens in each)
  std::optional<TokenIdType> end_id;  // generation stops after emitting it (unset: never)
  std::optional<TokenIdType> pad_id;  // padding for outputs
  SamplingConfig sampling_config;
  OutputConfig output_config;
  std::vector<VecTokens> stop_words;  // stop after any of these sequences; it is kept in the output
  std::vector<VecTokens> bad_words;   // these sequences are never generated
  std::optional<std::vector<float>> embedding_bias;  // [vocab_size], added to the logits
  SizeType num_return_sequences = 1;                 // only 1 is supported
};

// One response's payload. Beam dimension first; with beam_width 1 every vector has one beam.
struct ResponseResult {
  bool is_final = false;
  BeamTokens output_token_ids;                // streaming: only the new tokens
  std::vector<FinishReason> finish_reasons;   // per beam
  std::vector<float> cum_log_probs;           // per beam, when return_log_probs
  std::vector<std::vector<float>> log_probs;  // [beam][token], when return_log_probs
  std::vector<float> context_logits;          // [prompt_len * vocab], when requested
  std::vector<float> generation_logits;       // [beam * num_new_tokens * vocab]
  SizeType vocab_size = 0;                    // row size of the logits above
  SizeType sequence_index = 0;
  // KV cache use of this request (final response).
  SizeType kv_cache_alloc_new_blocks = 0;
  SizeType kv_cache_reused_blocks = 0;
  SizeType kv_cache_alloc_total_blocks = 0;
  // Timestamps, steady clock ns.
  std::int64_t arrival_time_ns = 0;
  std::int64_t first_scheduled_time_ns = 0;
  std::int64_t first_token_time_ns = 0;
  std::int64_t last_token_time_ns = 0;
};

struct Response {
  IdType request_id = 0;
  std::optional<Status> error;  // set: the request failed; this is its final response
  ResponseResult result;
  bool hasError() const { return error.has_value(); }
  bool isFinal() const { return hasError() || result.is_final; }
};

struct KvCacheConfig {
  bool enable_block_reuse = true;          // prefix reuse of full blocks
  std::optional<std::int64_t> max_tokens;  // max_tokens_in_paged_kv_cache; >= tokens_per_block
  std::optional<float> free_gpu_memory_fraction;  // 0.9 on GPU; range (0, 1]
  std::int64_t host_cache_size = 0;               // bytes of host offload pool (not used yet)
  // max_attention_window_size: per layer, the most keys a query attends (itself included), each
  // >= 1, repeated over the layers when the list is shorter; combined with the engine's own
  // sliding windows (the smaller wins). Unset: max_seq_len (no limit).
  std::optional<std::vector<SizeType>> max_attention_window;
  // Of a limited layer's keys, the sequence's first this many stay visible (attention sinks; the
  // recent window shrinks by as many). Unset: 0.
  std::optional<SizeType> sink_token_length;
  Status Validate() const;
};

struct SchedulerConfig {
  CapacitySchedulerPolicy policy = CapacitySchedulerPolicy::kGuaranteedNoEvict;
  bool enable_chunked_context =
      false;  // split long prompts into chunks that share steps with decoding
  Status Validate() const { return Status::Ok(); }
};

struct ExecutorConfig {
  BatchingType batching_type = BatchingType::kInflight;
  SizeType max_beam_width = 1;                // 1
  std::optional<SizeType> max_batch_size;     // engine's max_batch_size; range [1, engine's]
  std::optional<SizeType> max_num_tokens;     // engine's max_num_tokens; range [1, engine's]
  std::optional<std::size_t> max_queue_size;  // unset or 0: unlimited
  bool normalize_log_probs = true;            // log-probs of the distribution actually sampled from
  SizeType iter_stats_max_iterations = 1000;  // iteration stats kept for getLatestIterationStats
  DeviceKind device = DeviceKind::kAuto;      // auto: CUDA when a GPU is present, else CPU
  std::optional<std::vector<int>> gpu_device_ids;  // unset: device 0
  // Let a runner that can (the CUDA one) sample eligible requests on the device, so their logits
  // never reach the host; false: every token is sampled on the host (for comparisons).
  bool device_sampling = true;
  // Pipeline-parallel engines (pp_size > 1) keep up to pp_size micro-batches in flight, so that
  // the stages compute at once, where the runner can (the CPU runner under MPI); false: one step
  // at a time, each stage idle while the others compute (for comparisons).
  bool enable_micro_batching = true;
  // How the threads wait for each other where a wake-up is latency (a thread that slept a few
  // milliseconds resumes 20-70 us after its notify on a virtual machine): true spins, a core each,
  // in awaitResponses while requests are in flight and in the iteration thread for 20 ms after it
  // runs out of work; false sleeps on condition variables. Unset: on when the model runs on a GPU
  // (the host's cores are otherwise idle), off on the CPU (its cores run the model).
  std::optional<bool> busy_poll;
  SchedulerConfig scheduler_config;
  KvCacheConfig kv_cache_config;
  Status Validate() const;
};

struct KvCacheStats {
  std::int64_t max_num_blocks = 0;
  std::int64_t free_num_blocks = 0;
  std::int64_t used_num_blocks = 0;
  std::int64_t tokens_per_block = 0;
  std::int64_t alloc_total_blocks = 0;  // cumulative
  std::int64_t alloc_new_blocks = 0;    // cumulative
  std::int64_t reused_blocks = 0;       // cumulative
  double cache_hit_rate = 0.0;
};

struct IterationStats {
  std::int64_t timestamp_ns = 0;
  std::uint64_t iter = 0;
  double iter_latency_ms = 0;
  std::int64_t num_active_requests = 0;
  std::int64_t max_num_active_requests = 0;
  std::int64_t num_queued_requests = 0;
  std::int64_t num_scheduled_requests = 0;
  std::int64_t num_context_requests = 0;
  std::int64_t num_gen_requests = 0;
  std::int64_t num_paused_requests = 0;
  std::int64_t total_context_tokens = 0;
  std::int64_t micro_batch_id = 0;
  std::int64_t cpu_mem_usage = 0;
  std::int64_t gpu_mem_usage = 0;
  std::int64_t pinned_mem_usage = 0;
  KvCacheStats kv_cache_stats;
};

class Executor {
 public:
  // Loads the engine directory (docs/engine_format.md) and starts the iteration thread.
  static Result<std::unique_ptr<Executor>> Create(const std::string& engine_dir,
                                                  const ExecutorConfig& config);
  // Over a runner the caller made (the backend's leader mode wraps rank 0's runner); limits from
  // the runner's engine config.
  static Result<std::unique_ptr<Executor>> CreateWithRunner(
      const ExecutorConfig& config, std::unique_ptr<model::ModelRunner> runner);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Validates and queues; an invalid request or a full queue is an error here, nothing is queued.
  Result<IdType> enqueueRequest(const Request& request);
  // Each request as enqueueRequest would take it; the valid ones join the queue together, so the
  // scheduler's next step sees all of them (one step's batch does not depend on thread timing).
  std::vector<Result<IdType>> enqueueRequests(const std::vector<Request>& requests);

  // Blocks until at least one response is ready or the timeout passes (nullopt: wait forever, until
  // shutdown). Returns every ready response.
  std::vector<Response> awaitResponses(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  std::vector<Response> awaitResponses(
      IdType request_id, std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // Stops the request at the next step; its blocks are freed and it gets a final response with
  // finish reason kCancelled. Unknown or finished ids are ignored.
  void cancelRequest(IdType request_id);

  // Stats of the iterations since the last call (at most iter_stats_max_iterations).
  std::deque<IterationStats> getLatestIterationStats();
  KvCacheStats getKvCacheStats() const;
  SizeType vocabSize() const;
  SizeType maxBatchSize() const;  // effective, after defaults
  // Where the model runs: "cpu", or "cuda:<device ordinal>" (ExecutorConfig::device resolved).
  std::string deviceName() const;
  bool canEnqueueRequests() const;

  // Finishes nothing more: pending requests get a kCancelled error response; awaitResponses
  // returns.
  void shutdown();

  class Impl;

 private:
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight
