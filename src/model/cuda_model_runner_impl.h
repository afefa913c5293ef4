// The CUDA ModelRunner's class (cuda_model_runner.h gives the factory): shared by its two source
// files, cuda_model_runner.cc (creation and the forward pass's inputs) and
// cuda_model_runner_steps.cc (Step, Launch / Complete, graph replay, waiting). Internal to
// src/model.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/sm_subset_streams.h"
#include "model/attention_split.h"
#include "model/collectives.h"
#include "model/cuda_buffer.h"
#include "model/cuda_graphs.h"
#include "model/cuda_local_steps.h"
#include "model/cuda_model_runner.h"
#include "model/cuda_pipeline_results.h"
#include "model/cuda_sampling_stage.h"
#include "model/cuda_transformer.h"
#include "model/cuda_weights.h"
#include "model/lookahead_tokens.h"
#include "model/model_shard.h"

namespace inflight::model::cuda_runner {

namespace kc = kernels::cuda;

class CudaModelRunner final : public ModelRunner {
 public:
  static Result<std::unique_ptr<CudaModelRunner>> Create(const std::string& engine_dir,
                                                         const CudaRunnerOptions& options);
  ~CudaModelRunner() override {
    // Lookahead: steps launched and never completed still read and write the buffers freed below.
    if (local_ != nullptr && stream_ != nullptr) cudaStreamSynchronize(stream_);
    graphs_.reset();
    transformer_.reset();
    for (cudaEvent_t ev : {step_begin_, step_end_}) {
      if (ev != nullptr) cudaEventDestroy(ev);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  const EngineConfig& config() const override { return config_; }
  std::int64_t num_kv_blocks() const override { return kv_.num_blocks; }
  const char* device_name() const override { return device_name_.c_str(); }
  std::int64_t memory_bytes() const override {
    return weights_.buffer.bytes() + kv_.buffer.bytes() + workspace_bytes_ +
           (graphs_ ? graphs_->bytes() : 0) + (sampling_ ? sampling_->bias_bytes() : 0);
  }
  Result<StepOutput> Step(const StepInput& input) override;
  bool supports_device_sampling() const override { return true; }
  // The first stage of a pipeline keeps up to pp_size steps in flight: Launch queues its layers
  // and the hand-over, and posts the receive of the step's result on a stream of its own
  // (cuda_pipeline_results.h); Complete waits for that result. Other stages (and pp 1) run the
  // whole step in Launch. NOTE: lookahead's two steps in flight on one process are not
  // micro-batches: the executor must not split its sequences for them, so this stays 1.
  std::int32_t max_steps_in_flight() const override {
    return pipeline_ != nullptr ? pipeline_->capacity() : 1;
  }
  // One process (tp 1 x pp 1), not calibrating, unless INFLIGHT_CUDA_LOOKAHEAD=0: Launch queues
  // the step and returns, Complete waits for it (cuda_local_steps.h), and a step's decode tokens
  // may come from the device samples of the step launched just before (lookahead_tokens.h).
  bool supports_lookahead() const override { return local_ != nullptr; }
  // INFLIGHT_CUDA_LOOKAHEAD_MIN_SEQUENCES (default 256): at 8 sequences of an 8B the host's work
  // between steps is a small part of a step, and the new requests' extra step showed (+9 ms p50
  // through the server at concurrency 8, bench/results/2026-12-02-h200-lookahead.md).
  std::int32_t lookahead_min_sequences() const override { return lookahead_min_sequences_; }
  Status Launch(const StepInput& input) override;
  Result<StepOutput> Complete() override;

 private:
  CudaModelRunner() = default;
  // The step's uploads (step_ints_) and sampled ids (sampled_ids_), after the activations;
  // workspace_bytes_ counts both and cuBLASLt's workspace.
  Status AllocateStepBuffers();
  Status ValidateStep(const StepInput& input) const;
  // Queues the step. wait: then brings back its logits and sampled tokens; else (a step kept in
  // flight) only sizes them in `out` and, when `queued` is given, says where the sampled rows
  // will be (host logits, rare, come back before it returns either way). `tokens_from`
  // (lookahead): the step's tokens read on the device from the step before, patched in after the
  // upload (kernels/cuda/token_patch.h).
  Status Forward(const StepInput& input, StepOutput& out, bool wait = true,
                 QueuedSamples* queued = nullptr, const SampledWords* tokens_from = nullptr);
  // Launch on one process with lookahead (local_): queues the step, remembers where its samples
  // are (launched_samples_) and returns.
  Status LaunchLocal(const StepInput& input);
  // The whole step, one at a time (every runner but a pipeline's first stage).
  Result<StepOutput> RunStep(const StepInput& input);
  // Blocks until the stream's work is done; the time goes to out.device_wait_ms.
  Status WaitForStep(StepOutput& out);
  // context_streams_ and what goes with it, on Hopper unless INFLIGHT_ATTENTION_SM_SPLIT=0; a
  // driver without green contexts leaves it null (logged), which is not an error.
  Status SetUpAttentionSplit(const cudaDeviceProp& prop);
  // A step that CudaDecodeGraphs::Eligible accepts: replayed, and its sampled tokens read back.
  Status DecodeWithGraph(const StepInput& input, StepOutput& out);

  EngineConfig config_;
  ModelShard shard_;
  std::shared_ptr<Collectives> collectives_;  // outlives transformer_, which calls it
  DeviceBuffer stage_results_;  // pp > 1: the step's results on their way to the first stage
  DType dtype_ = DType::kBFloat16;
  std::string device_name_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t step_begin_ = nullptr, step_end_ = nullptr;  // a step's device time, for profiles
  std::unique_ptr<kc::CublasLtGemm> gemm_;
  // Streams on parts of the device for a mixed step's context attention (null: no green contexts,
  // not Hopper, or INFLIGHT_ATTENTION_SM_SPLIT=0); the transformer forks one from stream_ and
  // joins it back. Forced (=force, for tests): every mixed step takes the middle one, whatever the
  // prediction.
  std::unique_ptr<kc::SmSubsetStreams> context_streams_;
  bool attention_split_forced_ = false;
  AttentionRates attention_rates_;

  CudaWeights weights_;
  CudaKvCache kv_;
  std::unique_ptr<CudaTransformer> transformer_;

  std::int64_t max_tokens_ = 0;
  DeviceBuffer step_ints_, decode_ws_, sampled_ids_;
  std::int64_t workspace_bytes_ = 0;  // activations, step buffers and cuBLASLt's workspace
  std::mutex step_mutex_;             // Step: its Launch and Complete together
  std::mutex pipeline_mutex_;         // Launch, Complete and everything they touch
  // pp > 1, first stage: the steps in flight and their results' stream (null elsewhere).
  std::unique_ptr<CudaPipelineResults> pipeline_;
  // Lookahead (tp 1 x pp 1): the steps in flight and their sampled rows' pinned copies (null: one
  // at a time, Launch runs the whole step).
  std::unique_ptr<CudaLocalSteps> local_;
  std::int32_t lookahead_min_sequences_ = 1;
  // Lookahead: where the step launched last left its sampled ids on the device, by its sequence
  // (the next step's previous_step_row); nullopt before the first launch and after a launch that
  // failed once part of it was queued. NOTE: the words are the reused buffers (sampled_ids_ or
  // the graphs'), which the next step overwrites with its own samples; stream order keeps that
  // safe: the next step's patch runs on stream_ after its upload and before its forward pass, so
  // before that pass samples into the same words.
  std::optional<SampledWords> launched_samples_;
  std::deque<Result<StepOutput>> finished_;  // elsewhere: Launch's finished steps
  // Device sampling: this step's rows (host side) and the requests' embedding biases on the device.
  std::unique_ptr<CudaSamplingStage> sampling_;
  std::unique_ptr<CudaDecodeGraphs> graphs_;
  bool mixed_decode_split_ = true;  // Launch::num_decode_seqs in mixed steps
  // Dynamic RoPE past its original length: each step uploads a frequency table per sequence.
  bool rope_per_sequence_ = false;
  // Calibration: the transformer's amax bits on the device, folded into observe_amax_ after each
  // step (ObserveStep).
  std::shared_ptr<ActivationAmax> observe_amax_;
  DeviceBuffer amax_bits_;
  Status ObserveStep();
};

}  // namespace inflight::model::cuda_runner
