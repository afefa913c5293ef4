// The CUDA ModelRunner: validates a step, turns it into the forward pass's page-table format in
// one upload, queues the forward pass (cuda_transformer.h) or replays a decode graph
// (cuda_graphs.h), and brings back the logits or sampled tokens. What it owns: the stream, the
// shard's weights (cuda_weights.h), the KV pools, the step's staging buffers and the device
// sampling's (cuda_sampling_stage.h). The class is in cuda_model_runner_impl.h; this file creates
// it and queues the forward pass, cuda_model_runner_steps.cc runs the steps.
#include "model/cuda_model_runner.h"
#include "model/cuda_model_runner_impl.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "common/env_switch.h"
#include "common/logging.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sm_subset_streams.h"
#include "kernels/cuda/token_patch.h"
#include "model/attention_split.h"
#include "model/attention_windows.h"
#include "model/collectives.h"
#include "model/cuda_buffer.h"
#include "model/cuda_graphs.h"
#include "model/cuda_group_wait.h"
#include "model/cuda_sampling_stage.h"
#include "model/cuda_status.h"
#include "model/cuda_transformer.h"
#include "model/cuda_weights.h"
#include "model/device_sampling_batch.h"
#include "model/model_shard.h"
#include "model/rope_frequencies.h"
#include "model/step_validation.h"

namespace inflight::model {
namespace {

namespace kc = kernels::cuda;

// Appends `items` to the int32 upload `ints` at an 8-byte aligned word offset, which it returns.
template <typename T>
std::size_t AppendWords(std::vector<std::int32_t>& ints, const std::vector<T>& items) {
  static_assert(sizeof(T) % 8 == 0 && alignof(T) <= 8);
  if (ints.size() % 2 != 0) ints.push_back(0);
  const std::size_t at = ints.size();
  ints.resize(at + items.size() * sizeof(T) / 4);
  if (!items.empty()) std::memcpy(ints.data() + at, items.data(), items.size() * sizeof(T));
  return at;
}

}  // namespace

namespace cuda_runner {

Status CudaModelRunner::AllocateStepBuffers() {
  const EngineConfig& c = config_;
  const std::int64_t T = max_tokens_;
  struct {
    DeviceBuffer* buf;
    std::int64_t bytes;
  } plan[] = {
      // query_start, num_cached, token_ids, positions, logit_rows and block tables (grown per step)
      {&step_ints_, (4 * T + 6 * std::int64_t{c.build.max_batch_size} + 2) * 4},
      {&sampled_ids_, std::int64_t{c.build.max_batch_size} * 8},  // ids, then log-probs
  };
  workspace_bytes_ = transformer_->activation_bytes();
  for (auto& p : plan) {
    RETURN_IF_ERROR(p.buf->Allocate(p.bytes));
    workspace_bytes_ += p.bytes;
  }
  workspace_bytes_ += 32 << 20;  // cuBLASLt workspace
  return Status::Ok();
}

Result<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Create(const std::string& engine_dir,
                                                                 const CudaRunnerOptions& options) {
  if (!(options.kv_cache_free_gpu_mem_fraction > 0.0 &&
        options.kv_cache_free_gpu_mem_fraction <= 1.0)) {
    return InvalidArgument("kv_cache_free_gpu_mem_fraction " +
                           std::to_string(options.kv_cache_free_gpu_mem_fraction) +
                           " is not in (0, 1]");
  }
  std::unique_ptr<CudaModelRunner> r(new CudaModelRunner());
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= options.device) {
    return Unavailable("CUDA device " + std::to_string(options.device) + " requested, but " +
                       std::to_string(count) + " device(s) are visible");
  }
  r->device_ = options.device;
  CUDA_RETURN(cudaSetDevice(r->device_));
  cudaDeviceProp prop{};
  CUDA_RETURN(cudaGetDeviceProperties(&prop, r->device_));
  r->device_name_ = "cuda:" + std::to_string(r->device_);
  CUDA_RETURN(cudaStreamCreateWithFlags(&r->stream_, cudaStreamNonBlocking));
  CUDA_RETURN(cudaEventCreate(&r->step_begin_));
  CUDA_RETURN(cudaEventCreate(&r->step_end_));

  ASSIGN_OR_RETURN(r->config_, LoadEngineConfig(engine_dir));
  const EngineConfig& c = r->config_;
  r->rope_per_sequence_ = RopeVariesWithLength(c);
  r->collectives_ = options.collectives != nullptr ? options.collectives
                                                   : std::make_shared<SingleProcessCollectives>();
  const Collectives& group = *r->collectives_;
  ASSIGN_OR_RETURN(r->shard_, MakeModelShard(c, group.tp_rank(), group.tp_size(), group.pp_rank(),
                                             group.pp_size()));
  if (c.head_dim != 64 && c.head_dim != 80 && c.head_dim != 96 && c.head_dim != 128) {
    return Unsupported("head_dim " + std::to_string(c.head_dim) +
                       " has no CUDA attention kernel; accepted: 64, 80, 96, 128");
  }
  if (c.quant.kv_cache_fp8 && !kc::Fp8KvHeadDimSupported(c.head_dim)) {
    return Unsupported("kv_cache_quant_algo \"fp8\" with head_dim " + std::to_string(c.head_dim) +
                       " has no CUDA attention kernel; accepted: 64, 128 (or the CPU runner)");
  }
  if (c.qk_norm && c.position_embedding != PositionEmbedding::kRope) {
    return Unsupported(
        "qk_norm without the rotary embedding has no CUDA kernel (the q/k norm is fused into the "
        "rotation); this engine has learned positions");
  }
  ASSIGN_OR_RETURN(std::vector<kc::AttentionWindow> windows,
                   ResolveAttentionWindows(c, options.attention_limits));
  const std::string window_text = DescribeAttentionWindows(windows);
  r->dtype_ = c.dtype == DType::kFloat16 ? DType::kFloat16 : DType::kBFloat16;
  if (c.dtype == DType::kFloat32) LOG_INFO("cuda model runner: fp32 engine runs in bfloat16");
  r->max_tokens_ = std::max<std::int64_t>(c.build.max_num_tokens, c.build.max_batch_size);

  r->gemm_ = std::make_unique<kc::CublasLtGemm>();
  RETURN_IF_ERROR(CublasStatus(r->gemm_->status(), "cuBLASLt init"));
  RETURN_IF_ERROR(LoadCudaWeights(engine_dir, c, r->shard_, r->dtype_, r->weights_));
  // INFLIGHT_FUSED_SWIGLU=0 runs prompt-sized gate/up layers through cuBLASLt and the SwiGLU
  // kernel.
  const bool fused_swiglu = EnvSwitchOn("INFLIGHT_FUSED_SWIGLU");
  r->transformer_ = std::make_unique<CudaTransformer>(c, r->shard_, r->dtype_, r->weights_, r->kv_,
                                                      *r->gemm_, r->stream_, *r->collectives_,
                                                      fused_swiglu, std::move(windows));
  RETURN_IF_ERROR(r->transformer_->AllocateActivations(r->max_tokens_));
  RETURN_IF_ERROR(r->AllocateStepBuffers());
  if (options.observe_amax != nullptr) {
    // The observed points are the float forward pass's (an FP8 engine's fused producers skip them).
    // A split engine's rank observes its part; fp8_calibration.h's group folds the ranks'.
    if (c.quant.any()) {
      return InvalidArgument(
          "observe_amax calibrates a float engine; this engine has quantization " +
          QuantConfigToJson(c.quant));
    }
    r->observe_amax_ = options.observe_amax;
    RETURN_IF_ERROR(PrepareObservedAmax(*r->observe_amax_, c.num_layers));
    const std::int64_t bytes = c.num_layers * kNumAmaxPoints * sizeof(unsigned);
    RETURN_IF_ERROR(r->amax_bits_.Allocate(bytes));
    CUDA_RETURN(cudaMemset(r->amax_bits_.get(), 0, static_cast<std::size_t>(bytes)));
    r->transformer_->ObserveAmax(r->amax_bits_.get<unsigned>());
  }

  const std::int64_t tpb = c.build.tokens_per_block;
  // An FP8 cache's byte an element holds twice the tokens in the same memory.
  r->kv_.fp8 = c.quant.kv_cache_fp8;
  const std::int64_t elem = r->kv_.elem_bytes();
  const std::int64_t block_bytes_all_layers =
      2 * r->shard_.num_layers() * r->shard_.num_kv_heads * tpb * c.head_dim * elem;
  std::size_t free_b = 0, total_b = 0;
  CUDA_RETURN(cudaMemGetInfo(&free_b, &total_b));
  const auto budget = static_cast<std::int64_t>(static_cast<double>(free_b) *
                                                options.kv_cache_free_gpu_mem_fraction);
  std::int64_t blocks = budget / block_bytes_all_layers;
  if (options.max_kv_tokens > 0) blocks = std::min(blocks, options.max_kv_tokens / tpb);
  if (blocks < 1) {
    return Unavailable(
        "not enough device memory for the KV cache: weights " + MiB(r->weights_.buffer.bytes()) +
        ", activations " + MiB(r->workspace_bytes_) + ", " +
        MiB(static_cast<std::int64_t>(free_b)) + " free x fraction " +
        std::to_string(options.kv_cache_free_gpu_mem_fraction) + " = " + MiB(budget) +
        ", one KV block (all layers) needs " + std::to_string(block_bytes_all_layers) +
        " bytes; max_kv_tokens " + std::to_string(options.max_kv_tokens));
  }
  r->kv_.num_blocks = blocks;
  r->kv_.pool_elems = (blocks + 1) * r->shard_.num_kv_heads * tpb * c.head_dim;
  RETURN_IF_ERROR(r->kv_.buffer.Allocate((blocks + 1) * block_bytes_all_layers));
  r->sampling_ = std::make_unique<CudaSamplingStage>(
      c.vocab_size, static_cast<std::size_t>(c.build.max_batch_size));
  // INFLIGHT_CUDA_GRAPHS=0 turns graph replay off (for comparisons and debugging).
  bool graphs_enabled = EnvSwitchOn("INFLIGHT_CUDA_GRAPHS");
  if (graphs_enabled && r->rope_per_sequence_) {
    // A graph replays fixed arguments; dynamic RoPE uploads a frequency table per step.
    LOG_INFO("cuda model runner: dynamic RoPE with max_seq_len {} past {}: decode without graphs",
             c.build.max_seq_len, c.rope.original_max_position_embeddings);
    graphs_enabled = false;
  }
  // One more block than the executor sees: the scratch block of graph padding slots.
  CudaModelRunner* self = r.get();
  r->graphs_ = std::make_unique<CudaDecodeGraphs>(
      c, *r->transformer_, *r->sampling_, r->stream_, blocks, graphs_enabled,
      [self] { return WaitForGroupStream(self->stream_, self->shard_, *self->collectives_); });
  // INFLIGHT_MIXED_DECODE_SPLIT=0 sends a mixed step's decodes through the context kernel too.
  r->mixed_decode_split_ = EnvSwitchOn("INFLIGHT_MIXED_DECODE_SPLIT");
  RETURN_IF_ERROR(r->SetUpAttentionSplit(prop));
  // Micro-batches in flight unless INFLIGHT_CUDA_PIPELINE_MICRO_BATCHES=0 (then a pp > 1 group
  // runs one step at a time).
  const bool micro_batches = EnvSwitchOn("INFLIGHT_CUDA_PIPELINE_MICRO_BATCHES");
  if (r->shard_.pp_size > 1 && r->shard_.first_stage() && micro_batches) {
    ASSIGN_OR_RETURN(r->pipeline_, CudaPipelineResults::Create(r->shard_.pp_size));
  }
  // Lookahead on one process, so that the executor's work between steps overlaps the device's
  // (cuda_local_steps.h), unless INFLIGHT_CUDA_LOOKAHEAD=0 or calibration reads each step's amax.
  // Two in flight: the step the device computes and the one launched behind it.
  if (r->shard_.tp_size * r->shard_.pp_size == 1 && r->observe_amax_ == nullptr &&
      EnvInteger("INFLIGHT_CUDA_LOOKAHEAD", 1) != 0) {
    ASSIGN_OR_RETURN(r->local_, CudaLocalSteps::Create(2));
    r->lookahead_min_sequences_ = static_cast<std::int32_t>(
        std::clamp(EnvInteger("INFLIGHT_CUDA_LOOKAHEAD_MIN_SEQUENCES", 256), 1LL, 1LL << 30));
  }
  LOG_INFO(
      "cuda model runner on {} ({}): {} {} layers; weights {}, KV pool {} "
      "blocks x {} tokens = {} "
      "tokens ({}), activation workspace {}{}{}",
      r->device_name_, prop.name, c.architecture_name, c.num_layers,
      MiB(r->weights_.buffer.bytes()), blocks, tpb, blocks * tpb,
      MiB(r->kv_.buffer.bytes()) + (r->kv_.fp8 ? ", FP8 E4M3" : ""), MiB(r->workspace_bytes_),
      window_text.empty() ? "" : "; attention windows: " + window_text,
      r->local_ != nullptr
          ? "; lookahead from " + std::to_string(r->lookahead_min_sequences_) + " sequences a step"
          : std::string());
  return r;
}

Status CudaModelRunner::SetUpAttentionSplit(const cudaDeviceProp& prop) {
  const char* env = std::getenv("INFLIGHT_ATTENTION_SM_SPLIT");
  if (prop.major != 9 || (env != nullptr && std::string(env) == "0")) return Status::Ok();
  attention_split_forced_ = env != nullptr && std::string(env) == "force";
  // The context side's offers, every 8 SMs up to half an H100: the decode side shares the rest,
  // and needs most of the device to keep memory busy.
  std::string why;
  context_streams_ = kc::SmSubsetStreams::Create({16, 24, 32, 40, 48, 56, 64}, &why);
  if (context_streams_ == nullptr) {
    LOG_INFO("cuda model runner: a mixed step's two attentions run in turn ({})", why);
    return Status::Ok();
  }
  int mem_khz = 0, bus_bits = 0;
  CUDA_RETURN(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device_));
  CUDA_RETURN(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device_));
  // Double data rate: two transfers per memory clock.
  attention_rates_ =
      HopperAttentionRates(context_streams_->device_sms(), 2.0 * mem_khz * (bus_bits / 8.0));
  return transformer_->CreateAttentionSplitEvents();
}

Status CudaModelRunner::ValidateStep(const StepInput& input) const {
  RETURN_IF_ERROR(ValidateStepInput(input, config_, kv_.num_blocks, supports_lookahead()));
  std::int64_t total = 0;
  for (const SequenceStep& s : input.sequences) total += static_cast<std::int64_t>(s.tokens.size());
  if (total > max_tokens_) {
    return InvalidArgument("the step has " + std::to_string(total) +
                           " tokens; the engine's max_num_tokens is " +
                           std::to_string(max_tokens_));
  }
  return Status::Ok();
}

Status CudaModelRunner::Forward(const StepInput& input, StepOutput& out, bool wait,
                                QueuedSamples* queued, const SampledWords* tokens_from) {
  const EngineConfig& c = config_;
  const auto num_seqs = static_cast<std::int32_t>(input.sequences.size());
  // Host side of the page-table format (kernels/cuda/paged_batch.h), sent in one copy.
  std::int32_t max_blocks = 1, max_q = 0, max_kv = 0;
  for (const auto& s : input.sequences) {
    max_blocks = std::max(max_blocks, static_cast<std::int32_t>(s.block_table.size()));
    max_q = std::max(max_q, static_cast<std::int32_t>(s.tokens.size()));
    max_kv = std::max(max_kv, s.num_cached + static_cast<std::int32_t>(s.tokens.size()));
  }
  std::vector<std::int32_t> query_start{0}, num_cached, token_ids, positions, logit_rows, tables;
  // Device sampling: the rows to sample (after every returned row in logit_rows) and, per sampled
  // row, its sequence; parameters and lists go in sampling_.
  std::vector<std::int32_t> sample_rows, sample_seq;
  // Lookahead: (index into token_ids, word of tokens_from->words) per token the step before
  // sampled on the device.
  std::vector<std::int32_t> patches;
  sampling_->Clear();
  tables.assign(static_cast<std::size_t>(num_seqs) * static_cast<std::size_t>(max_blocks), 0);
  for (std::int32_t i = 0; i < num_seqs; ++i) {
    const SequenceStep& s = input.sequences[static_cast<std::size_t>(i)];
    const std::int32_t first = query_start.back();
    const auto n = static_cast<std::int32_t>(s.tokens.size());
    query_start.push_back(first + n);
    num_cached.push_back(s.num_cached);
    std::copy(s.block_table.begin(), s.block_table.end(),
              tables.begin() + static_cast<std::ptrdiff_t>(i) * max_blocks);
    const std::int32_t word =
        tokens_from != nullptr ? tokens_from->word_of_sequence[static_cast<std::size_t>(i)] : -1;
    for (std::int32_t t = 0; t < n; ++t) {
      // A patched token (n is 1) uploads 0, a valid id, until the patch overwrites it.
      token_ids.push_back(word >= 0 ? 0 : s.tokens[static_cast<std::size_t>(t)]);
      positions.push_back(s.num_cached + t);
    }
    if (word >= 0) {
      patches.push_back(first);
      patches.push_back(word);
    }
    out.row_begin.push_back(static_cast<std::int32_t>(logit_rows.size()));
    if (s.logits == SequenceStep::Logits::kLast) {
      logit_rows.push_back(first + n - 1);
    } else if (s.logits == SequenceStep::Logits::kAll) {
      for (std::int32_t t = 0; t < n; ++t) logit_rows.push_back(first + t);
    }
    if (s.device_sampling) {
      sample_rows.push_back(first + n - 1);
      sample_seq.push_back(i);
      RETURN_IF_ERROR(sampling_->Add(*s.device_sampling, stream_));
    }
  }
  const auto R_out = static_cast<std::int64_t>(logit_rows.size());
  logit_rows.insert(logit_rows.end(), sample_rows.begin(), sample_rows.end());
  const std::int32_t T = query_start.back();
  std::vector<std::int32_t> ints;
  const auto append = [&](const std::vector<std::int32_t>& v) {
    const std::size_t at = ints.size();
    ints.insert(ints.end(), v.begin(), v.end());
    return at;
  };
  const DeviceSamplingBatch& sampling_batch = sampling_->batch();
  const std::size_t o_qs = append(query_start), o_nc = append(num_cached),
                    o_tok = append(token_ids), o_pos = append(positions),
                    o_rows = append(logit_rows), o_tab = append(tables),
                    o_lists = append(sampling_batch.lists()), o_patches = append(patches),
                    o_params = AppendWords(ints, sampling_batch.params());
  // Dynamic RoPE: sequence s's frequencies for the length it reaches in this step, as
  // transformers recomputes them per forward call (model/rope_frequencies.h).
  std::size_t o_rope = 0;
  if (rope_per_sequence_) {
    const auto half = static_cast<std::size_t>(c.head_dim / 2);
    std::vector<float> rope(half * static_cast<std::size_t>(num_seqs));
    for (std::int32_t i = 0; i < num_seqs; ++i) {
      RopeInvFrequenciesForLength(c,
                                  num_cached[static_cast<std::size_t>(i)] +
                                      query_start[static_cast<std::size_t>(i) + 1] -
                                      query_start[static_cast<std::size_t>(i)],
                                  rope.data() + static_cast<std::size_t>(i) * half);
    }
    o_rope = ints.size();
    ints.resize(o_rope + rope.size());  // fp32 words among the int32 ones: one upload
    std::memcpy(ints.data() + o_rope, rope.data(), rope.size() * sizeof(float));
  }
  // NOTE: with a step in flight (lookahead, a pipeline) growing a buffer frees memory that step
  // may still read; cudaFree waits for the device first.
  if (static_cast<std::int64_t>(ints.size() * 4) > step_ints_.bytes()) {
    RETURN_IF_ERROR(step_ints_.Allocate(static_cast<std::int64_t>(ints.size() * 4) * 2));
  }
  auto* d_ints = step_ints_.get<std::int32_t>();
  CUDA_RETURN(
      cudaMemcpyAsync(d_ints, ints.data(), ints.size() * 4, cudaMemcpyHostToDevice, stream_));
  if (!patches.empty()) {
    CUDA_RETURN(kc::PatchTokenIds(d_ints + o_tok, d_ints + o_patches,
                                  static_cast<std::int32_t>(patches.size() / 2), tokens_from->words,
                                  static_cast<std::int32_t>(c.vocab_size), stream_));
  }
  // NOTE: after the patch, whose words may be sampled_ids_ itself: growing it frees the old
  // buffer, which waits for the device (the patch included).
  const auto num_sampled = static_cast<std::int64_t>(sample_rows.size());
  if (num_sampled * 8 > sampled_ids_.bytes()) {
    RETURN_IF_ERROR(sampled_ids_.Allocate(num_sampled * 8));
  }

  kc::PagedBatch batch;
  batch.num_seqs = num_seqs;
  batch.num_tokens = T;
  batch.max_query_len = max_q;
  batch.max_kv_len = max_kv;
  batch.query_start = d_ints + o_qs;
  batch.num_cached = d_ints + o_nc;
  batch.block_tables = d_ints + o_tab;
  batch.max_blocks_per_seq = max_blocks;
  // The leading one-row sequences (the scheduler puts decodes first) take the decode kernel.
  std::int32_t num_decodes = 0, decode_max_kv = 0;
  const bool split_decodes = mixed_decode_split_ || max_q == 1;
  while (split_decodes && num_decodes < num_seqs &&
         input.sequences[static_cast<std::size_t>(num_decodes)].tokens.size() == 1) {
    const SequenceStep& s = input.sequences[static_cast<std::size_t>(num_decodes)];
    decode_max_kv = std::max(decode_max_kv, s.num_cached + 1);
    ++num_decodes;
  }
  CudaTransformer::Launch l;
  l.batch = batch;
  l.token_ids = d_ints + o_tok;
  l.positions = d_ints + o_pos;
  if (rope_per_sequence_) l.rope_inv_freq = reinterpret_cast<const float*>(d_ints + o_rope);
  l.logit_rows = d_ints + o_rows;
  l.num_rows = static_cast<std::int64_t>(logit_rows.size());
  l.logit_rows_are_token_rows = true;
  for (std::size_t i = 0; i < logit_rows.size(); ++i) {
    if (logit_rows[i] != static_cast<std::int32_t>(i)) l.logit_rows_are_token_rows = false;
  }
  l.num_out_rows = R_out;
  out.logits.resize(static_cast<std::size_t>(R_out * c.vocab_size));
  l.host_logits = out.logits.data();
  l.sampling_params = reinterpret_cast<const kc::SamplingParams*>(d_ints + o_params);
  l.sampling_lists = d_ints + o_lists;
  // This step's ids, then its log-probs, so that one copy brings both back.
  l.sampled_ids = sampled_ids_.get<std::int32_t>();
  l.sampled_log_probs = sampled_ids_.get<float>() + num_sampled;
  l.num_decode_seqs = num_decodes;
  l.decode_max_kv_len = decode_max_kv;
  if (num_decodes > 0) {
    const std::int64_t ws =
        transformer_->DecodeWorkspaceBytes(LeadingDecodes(batch, num_decodes, decode_max_kv));
    if (ws > decode_ws_.bytes()) RETURN_IF_ERROR(decode_ws_.Allocate(ws));
    l.decode_ws = decode_ws_.get();
    l.decode_ws_bytes = static_cast<std::size_t>(decode_ws_.bytes());
    if (context_streams_ != nullptr && num_decodes < num_seqs) {
      // The keys each row attends, averaged over the layers (windows make them differ).
      AttentionWork work;
      for (std::int32_t i = 0; i < num_seqs; ++i) {
        const SequenceStep& s = input.sequences[static_cast<std::size_t>(i)];
        const double keys =
            transformer_->MeanRowKeys(s.num_cached, static_cast<std::int64_t>(s.tokens.size()));
        if (i < num_decodes) {
          work.decode_bytes += DecodeAttentionBytes(std::llround(keys), shard_.num_kv_heads,
                                                    c.head_dim, kv_.elem_bytes());
        } else {
          work.context_flops += AttentionPairFlops(keys, shard_.num_q_heads, c.head_dim);
        }
      }
      const std::vector<int>& offered = context_streams_->sms();
      const int pick = attention_split_forced_
                           ? static_cast<int>(offered.size() / 2)
                           : ChooseAttentionSplit(work, attention_rates_, offered);
      if (pick >= 0) l.context_stream = context_streams_->stream(static_cast<std::size_t>(pick));
    }
  }
  RETURN_IF_ERROR(transformer_->Enqueue(l));
  if (!wait) {
    if (queued != nullptr && num_sampled > 0) {
      queued->words = sampled_ids_.get();
      queued->log_prob_offset = num_sampled;
      queued->sequences = std::move(sample_seq);
    }
    if (num_sampled > 0) {
      out.sampled_tokens.assign(static_cast<std::size_t>(num_seqs), -1);
      out.sampled_log_probs.assign(static_cast<std::size_t>(num_seqs),
                                   std::numeric_limits<float>::quiet_NaN());
    }
    return Status::Ok();
  }
  PinnedBuffer& host_ids = sampling_->host_ids();
  RETURN_IF_ERROR(host_ids.Reserve(num_sampled * 8));
  const auto* sampled = host_ids.get<const std::int32_t>();
  if (num_sampled > 0) {
    CUDA_RETURN(cudaMemcpyAsync(host_ids.get(), sampled_ids_.get(),
                                static_cast<std::size_t>(num_sampled) * 8, cudaMemcpyDeviceToHost,
                                stream_));
  }
  RETURN_IF_ERROR(WaitForStep(out));
  if (num_sampled > 0) {
    out.sampled_tokens.assign(static_cast<std::size_t>(num_seqs), -1);
    out.sampled_log_probs.assign(static_cast<std::size_t>(num_seqs),
                                 std::numeric_limits<float>::quiet_NaN());
    for (std::size_t j = 0; j < sample_seq.size(); ++j) {
      const auto i = static_cast<std::size_t>(sample_seq[j]);
      out.sampled_tokens[i] = CudaSamplingStage::SampledToken(sampled[j]);
      out.sampled_log_probs[i] = std::bit_cast<float>(sampled[sample_seq.size() + j]);
    }
  }
  return Status::Ok();
}

}  // namespace cuda_runner

bool CudaDeviceAvailable() {
  return CudaDeviceCount() > 0;
}

int CudaDeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

Result<std::unique_ptr<ModelRunner>> CreateCudaModelRunner(const std::string& engine_dir,
                                                           const CudaRunnerOptions& options) {
  ASSIGN_OR_RETURN(auto runner, cuda_runner::CudaModelRunner::Create(engine_dir, options));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace inflight::model
