#include "model/cuda_model_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_swiglu.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/paged_attention_context.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope_kv_write.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sm_subset_streams.h"
#include "model/attention_split.h"
#include "model/device_sampling_batch.h"
#include "model/embedding_bias_cache.h"
#include "model/rope_frequencies.h"
#include "model/safetensors.h"
#include "model/step_validation.h"
#include "model/transformer_weights.h"

namespace inflight::model {
namespace {

namespace kc = kernels::cuda;

Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorString(err));
}

#define CUDA_RETURN(expr) RETURN_IF_ERROR(CudaStatus((expr), #expr))

Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string(what) + ": cuBLASLt status " + std::to_string(static_cast<int>(st)));
}

// SampleRows' error codes as StepOutput reports them.
TokenIdType SampledToken(std::int32_t id) {
  if (id == kc::kSampledNotFinite) return StepOutput::kSampledNotFinite;
  if (id == kc::kSampledAllBanned) return StepOutput::kSampledAllBanned;
  return id;
}

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

std::string MiB(std::int64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// One CUDA allocation, freed on destruction: device memory, or pinned host memory, which a
// device-to-host copy fills without blocking the host (a pageable destination makes
// cudaMemcpyAsync wait for the stream, hiding where a step's time goes).
enum class Memory { kDevice, kPinnedHost };
template <Memory kKind>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  ~CudaBuffer() { Reset(); }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  Status Allocate(std::int64_t bytes) {
    Reset();
    if (bytes <= 0) return Status::Ok();
    if constexpr (kKind == Memory::kDevice) {
      CUDA_RETURN(cudaMalloc(&ptr_, static_cast<std::size_t>(bytes)));
    } else {
      CUDA_RETURN(cudaMallocHost(&ptr_, static_cast<std::size_t>(bytes)));
    }
    bytes_ = bytes;
    return Status::Ok();
  }
  // Allocate, unless `bytes` already fit.
  Status Reserve(std::int64_t bytes) { return bytes <= bytes_ ? Status::Ok() : Allocate(bytes); }
  void Reset() {
    if (ptr_ != nullptr) {
      if constexpr (kKind == Memory::kDevice) {
        cudaFree(ptr_);
      } else {
        cudaFreeHost(ptr_);
      }
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  std::int64_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::int64_t bytes_ = 0;
};
using DeviceBuffer = CudaBuffer<Memory::kDevice>;
using PinnedBuffer = CudaBuffer<Memory::kPinnedHost>;

// The decode kernel's view of a step's first `num_seqs` sequences, one query row each; rows keep
// their step-wide indices.
kc::PagedBatch LeadingDecodes(const kc::PagedBatch& batch, std::int32_t num_seqs,
                              std::int32_t max_kv_len) {
  kc::PagedBatch view = batch;
  view.num_seqs = num_seqs;
  view.num_tokens = num_seqs;
  view.max_query_len = num_seqs > 0 ? 1 : 0;
  view.max_kv_len = max_kv_len;
  return view;
}

// The context kernel's view of the sequences after the first `skip`.
kc::PagedBatch AfterDecodes(const kc::PagedBatch& batch, std::int32_t skip) {
  kc::PagedBatch view = batch;
  view.num_seqs -= skip;
  view.num_tokens -= skip;
  view.query_start += skip;
  view.num_cached += skip;
  view.block_tables += static_cast<std::ptrdiff_t>(skip) * batch.max_blocks_per_seq;
  return view;
}

struct DeviceLayer {
  const void *attn_norm = nullptr, *attn_norm_bias = nullptr, *qkv = nullptr, *qkv_bias = nullptr,
             *attn_out = nullptr, *attn_out_bias = nullptr, *mlp_norm = nullptr,
             *mlp_norm_bias = nullptr, *mlp_in = nullptr, *mlp_in_bias = nullptr, *down = nullptr,
             *down_bias = nullptr;
};

class CudaModelRunner final : public ModelRunner {
 public:
  static Result<std::unique_ptr<CudaModelRunner>> Create(const std::string& engine_dir,
                                                         const CudaRunnerOptions& options);
  ~CudaModelRunner() override {
    for (auto& [bucket, exec] : graphs_) cudaGraphExecDestroy(exec);
    for (cudaEvent_t ev : {step_begin_, step_end_, attn_fork_, attn_join_}) {
      if (ev != nullptr) cudaEventDestroy(ev);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  const EngineConfig& config() const override { return config_; }
  std::int64_t num_kv_blocks() const override { return num_blocks_; }
  const char* device_name() const override { return device_name_.c_str(); }
  std::int64_t memory_bytes() const override {
    return weights_buf_.bytes() + kv_buf_.bytes() + workspace_bytes_ + graph_ints_.bytes() +
           graph_ws_.bytes() + graph_ids_.bytes() + graph_lists_.bytes() +
           (bias_cache_ ? bias_cache_->bytes() : 0);
  }
  Result<StepOutput> Step(const StepInput& input) override;
  bool supports_device_sampling() const override { return true; }

 private:
  CudaModelRunner() = default;
  Status LoadWeights(const std::string& engine_dir);
  Status AllocateWorkspace();
  Status ValidateStep(const StepInput& input) const;
  Status Norm(void* out, const void* x, const void* w, const void* b, std::int64_t rows);
  Status Linear(void* y, const void* x, const void* w, const void* bias, std::int64_t m,
                std::int64_t n, std::int64_t k);
  // y += x · wᵀ (+ bias): a layer's output added to the residual stream in the GEMM's epilogue.
  Status LinearAdd(void* y, const void* x, const void* w, const void* bias, std::int64_t m,
                   std::int64_t n, std::int64_t k);
  // Device pointers and sizes of one step: everything Enqueue needs to queue the forward pass.
  struct Launch {
    kc::PagedBatch batch;
    const std::int32_t* token_ids = nullptr;
    const std::int32_t* positions = nullptr;
    const std::int32_t* logit_rows = nullptr;  // [num_rows] token rows through lm_head
    std::int64_t num_rows = 0;
    // logit_rows[i] == i for every i: the final norm then reads the token rows where they are.
    bool logit_rows_are_token_rows = false;
    std::int64_t num_out_rows = 0;  // rows [0, num_out_rows) are copied to host_logits
    float* host_logits = nullptr;   // the rest are sampled (parameters per sampled row)
    const kc::SamplingParams* sampling_params = nullptr;  // [num_rows - num_out_rows]
    const std::int32_t* sampling_lists = nullptr;         // what sampling_params index
    std::int32_t* sampled_ids = nullptr;                  // device [num_rows - num_out_rows]
    float* sampled_log_probs = nullptr;                   // device [num_rows - num_out_rows]
    // Sequences [0, num_decode_seqs) have one query row each and go to the decode kernel, which
    // reads each KV head once for all its query heads; the context kernel, which takes the rest,
    // would give each of them a whole query tile per head. A decode-only step sends them all.
    std::int32_t num_decode_seqs = 0;
    std::int32_t decode_max_kv_len = 0;  // over those sequences
    std::int32_t partition = 0;
    void* decode_ws = nullptr;
    std::size_t decode_ws_bytes = 0;
    // Set: the context attention runs there (a few SMs, high priority) beside the decode attention
    // on stream_ (model/attention_split.h); null: both on stream_, in turn.
    cudaStream_t context_stream = nullptr;
  };
  // Queues the forward pass on stream_: no host synchronisation, no allocation, so that a decode
  // step can be captured into a CUDA graph.
  Status Enqueue(const Launch& l);
  Status Forward(const StepInput& input, StepOutput& out);
  // Blocks until the stream's work is done; the time goes to out.device_wait_ms.
  Status WaitForStep(StepOutput& out);
  // Adds the sequence's DeviceSampling to sampling_batch_, its embedding bias uploaded if new.
  Status StageSampling(const DeviceSampling& d);
  // Decode steps whose sequences all decode one token and are all device-sampled replay a CUDA
  // graph captured for their batch-size bucket (the next power of two, at most max_batch_size).
  // Padding slots decode token 0 at position 0 into a scratch KV block no sequence owns. The
  // sampling lists of the step must fit graph_lists_ (else the step runs without a graph).
  bool GraphEligible(const StepInput& input) const;
  // Capacity of graph_lists_: every slot's penalty pairs for a max_seq_len history, plus bans, up
  // to 16 MiB (long contexts with many penalised sequences then run without a graph).
  std::int64_t GraphListWords() const {
    return std::min<std::int64_t>(std::int64_t{config_.build.max_batch_size} *
                                      (2 * std::int64_t{config_.build.max_seq_len} + 64),
                                  std::int64_t{1} << 22);
  }
  Status SetUpGraphs();
  // context_streams_ and what goes with it, on Hopper unless INFLIGHT_ATTENTION_SM_SPLIT=0; a
  // driver without green contexts leaves it null (logged), which is not an error.
  Status SetUpAttentionSplit(const cudaDeviceProp& prop);
  Status DecodeWithGraph(const StepInput& input, StepOutput& out);

  EngineConfig config_;
  DType dtype_ = DType::kBFloat16;
  std::string device_name_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t step_begin_ = nullptr, step_end_ = nullptr;  // a step's device time, for profiles
  std::unique_ptr<kc::CublasLtGemm> gemm_;
  // Streams on parts of the device for a mixed step's context attention (null: no green contexts,
  // not Hopper, or INFLIGHT_ATTENTION_SM_SPLIT=0), and the events that fork one from stream_ and
  // join it back. Forced (=force, for tests): every mixed step takes the middle one, whatever the
  // prediction.
  std::unique_ptr<kc::SmSubsetStreams> context_streams_;
  bool attention_split_forced_ = false;
  AttentionRates attention_rates_;
  cudaEvent_t attn_fork_ = nullptr, attn_join_ = nullptr;

  DeviceBuffer weights_buf_;
  const void* embed_ = nullptr;
  const void* pos_embed_ = nullptr;
  const void* final_norm_ = nullptr;
  const void* final_norm_bias_ = nullptr;
  const void* lm_head_ = nullptr;
  std::vector<DeviceLayer> layers_;
  DeviceBuffer inv_freq_;

  std::int64_t num_blocks_ = 0;
  std::int64_t pool_elems_ = 0;  // one pool (K or V of one layer)
  DeviceBuffer kv_buf_;

  // Activations for up to max_num_tokens rows; logits in chunks of logit_chunk_ rows: at most
  // kLogitChunk, fewer when max_batch_size is smaller. One lm_head GEMM reads the 1 GB of an 8B
  // model's lm_head once, so a decode step of 1024 sequences in chunks of 128 read it 8 times
  // (~1.3 ms more on an H100); 512 rows of fp32 logits cost 263 MB of a 128k vocabulary.
  static constexpr std::int64_t kLogitChunk = 512;
  std::int64_t logit_chunk_ = 0;
  std::int64_t max_tokens_ = 0;
  DeviceBuffer residual_, normed_, qkv_, attn_, mlp_, mlp_act_, logit_x_, logits_, step_ints_,
      decode_ws_, sampled_ids_;
  PinnedBuffer host_ids_;  // sampled ids and log-probs, copied back each step
  std::int64_t workspace_bytes_ = 0;
  std::mutex step_mutex_;
  // Device sampling: this step's rows (host side) and the requests' embedding biases on the device.
  DeviceSamplingBatch sampling_batch_;
  std::unique_ptr<EmbeddingBiasCache> bias_cache_;

  // CUDA graphs (DecodeWithGraph). Every bucket reads the same fixed buffers, filled per step:
  // graph_ints_ holds query_start and logit_rows (constant), then per slot num_cached, token and
  // position, the slots' SamplingParams (8-byte aligned) and the block tables [slots,
  // graph_blocks_]; graph_lists_ the sampling lists; graph_ids_ the sampled ids of a bucket's
  // slots, then their log-probs.
  bool graphs_enabled_ = true;
  bool mixed_decode_split_ = true;  // Launch::num_decode_seqs in mixed steps
  bool fused_swiglu_ = true;        // kernels/cuda/gemm_swiglu.h for prompt-sized steps
  bool graphs_ready_ = false;
  std::int32_t graph_slots_ = 0;   // max_batch_size
  std::int32_t graph_blocks_ = 0;  // block-table columns: enough for max_seq_len
  std::int64_t scratch_block_ = 0;
  DeviceBuffer graph_ints_, graph_ws_, graph_ids_, graph_lists_;  // never reallocated once captured
  std::int64_t graph_params_at_ = 0;                              // word offsets into graph_ints_
  std::int64_t graph_tables_at_ = 0;
  // By (batch bucket, key bucket): GraphKeys' bucket of the step's longest sequence.
  std::map<std::pair<std::int32_t, std::int32_t>, cudaGraphExec_t> graphs_;
  // The decode batch a graph is captured for: `seqs` slots, attention split for `keys` keys.
  kc::PagedBatch GraphBatch(std::int32_t seqs, std::int32_t keys) const;
  // The power of two (at least kMinGraphKeys, at most max_seq_len) at or above `max_kv_len`: the
  // graphs' attention is split for it, so that a short context in an engine built for long ones
  // is not cut into mostly empty splits, nor a long one into too few.
  std::int32_t GraphKeys(std::int32_t max_kv_len) const;
  static constexpr std::int32_t kMinGraphKeys = 256;
  // The fewest rows for the fused gate/up + SwiGLU kernel: against cuBLASLt and the SwiGLU kernel
  // it measured 0.92-1.05x from 1024 rows but 1.01-1.09x at 256 (H100 and H200, 8B shapes).
  static constexpr std::int64_t kFusedSwiGluMinRows = 1024;
};

Status CudaModelRunner::LoadWeights(const std::string& engine_dir) {
  const std::string path = (std::filesystem::path(engine_dir) / "rank0.safetensors").string();
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
  ASSIGN_OR_RETURN(TransformerWeights w, BindTransformerWeights(config_, *file));
  const EngineConfig& c = config_;
  const std::int64_t H = c.hidden_size, q_dim = c.num_attention_heads * c.head_dim;
  const std::int64_t qkv_rows = c.QkvRows(1), inter = c.intermediate_size;
  const bool swiglu = c.activation == Activation::kSwiGlu;
  const std::int64_t mlp_rows = swiglu ? 2 * inter : inter;

  // Every tensor (host pointer, element count), laid out back to back in one device buffer.
  struct Item {
    WeightPtr src;
    std::int64_t n;
    const void** dst;
  };
  std::vector<Item> items;
  const auto add = [&](WeightPtr p, std::int64_t n, const void** dst) {
    if (p) items.push_back({p, n, dst});
  };
  add(w.embed, c.vocab_size * H, &embed_);
  add(w.pos_embed, c.max_position_embeddings * H, &pos_embed_);
  add(w.final_norm, H, &final_norm_);
  add(w.final_norm_bias, H, &final_norm_bias_);
  layers_.resize(w.layers.size());
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    DeviceLayer& d = layers_[i];
    add(l.attn_norm, H, &d.attn_norm);
    add(l.attn_norm_bias, H, &d.attn_norm_bias);
    add(l.qkv, qkv_rows * H, &d.qkv);
    add(l.qkv_bias, qkv_rows, &d.qkv_bias);
    add(l.attn_out, H * q_dim, &d.attn_out);
    add(l.attn_out_bias, H, &d.attn_out_bias);
    add(l.mlp_norm, H, &d.mlp_norm);
    add(l.mlp_norm_bias, H, &d.mlp_norm_bias);
    add(swiglu ? l.gate_up : l.fc, mlp_rows * H, &d.mlp_in);
    add(swiglu ? l.gate_up_bias : l.fc_bias, mlp_rows, &d.mlp_in_bias);
    add(l.down, H * inter, &d.down);
    add(l.down_bias, H, &d.down_bias);
  }
  const bool tied = w.lm_head.data == w.embed.data;
  if (!tied) add(w.lm_head, c.vocab_size * H, &lm_head_);

  const std::int64_t elem = static_cast<std::int64_t>(DTypeSize(dtype_));
  std::int64_t total = 0;
  std::vector<std::int64_t> offsets;
  for (const Item& it : items) {
    offsets.push_back(total);
    total += (it.n * elem + 255) / 256 * 256;  // 256-byte aligned for cuBLASLt
  }
  std::size_t free_b = 0, total_b = 0;
  CUDA_RETURN(cudaMemGetInfo(&free_b, &total_b));
  if (total > static_cast<std::int64_t>(free_b)) {
    return Unavailable("not enough device memory for the weights of " + engine_dir + ": need " +
                       MiB(total) + ", " + MiB(static_cast<std::int64_t>(free_b)) + " free of " +
                       MiB(static_cast<std::int64_t>(total_b)));
  }
  RETURN_IF_ERROR(weights_buf_.Allocate(total));
  std::vector<float> staging_f;
  std::vector<std::uint16_t> staging;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    char* dst = weights_buf_.get<char>() + offsets[i];
    staging_f.resize(static_cast<std::size_t>(it.n));
    it.src.LoadRange(0, it.n, staging_f.data());
    staging.resize(static_cast<std::size_t>(it.n));
    ConvertFromFloat(dtype_, staging_f.data(), staging.data(), staging.size());
    CUDA_RETURN(cudaMemcpy(dst, staging.data(), staging.size() * 2, cudaMemcpyHostToDevice));
    *it.dst = dst;
  }
  if (tied) lm_head_ = embed_;

  if (const std::vector<float> inv = RopeInvFrequencies(c); !inv.empty()) {
    RETURN_IF_ERROR(inv_freq_.Allocate(static_cast<std::int64_t>(inv.size() * sizeof(float))));
    CUDA_RETURN(cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float),
                           cudaMemcpyHostToDevice));
  }
  return Status::Ok();
}

Status CudaModelRunner::AllocateWorkspace() {
  const EngineConfig& c = config_;
  const std::int64_t T = max_tokens_, H = c.hidden_size,
                     e = static_cast<std::int64_t>(DTypeSize(dtype_));
  const std::int64_t inter = c.intermediate_size;
  const bool swiglu = c.activation == Activation::kSwiGlu;
  const std::int64_t R = std::min<std::int64_t>(kLogitChunk, std::max(c.build.max_batch_size, 1));
  logit_chunk_ = R;
  struct {
    DeviceBuffer* buf;
    std::int64_t bytes;
  } plan[] = {
      {&residual_, T * H * e},
      {&normed_, T * H * e},
      {&qkv_, T * c.QkvRows(1) * e},
      {&attn_, T * c.num_attention_heads * c.head_dim * e},
      {&mlp_, T * (swiglu ? 2 * inter : inter) * e},
      {&mlp_act_, T * inter * e},
      {&logit_x_, R * H * e},
      {&logits_, R * c.vocab_size * 4},
      // query_start, num_cached, token_ids, positions, logit_rows and block tables (grown per step)
      {&step_ints_, (4 * T + 6 * std::int64_t{c.build.max_batch_size} + 2) * 4},
      {&sampled_ids_, std::int64_t{c.build.max_batch_size} * 8},  // ids, then log-probs
  };
  workspace_bytes_ = 0;
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
  if (c.tp_size != 1 || c.pp_size != 1) {
    return Unsupported(
        "the CUDA runner runs tp_size 1, pp_size 1 engines; "
        "this one has tp_size " +
        std::to_string(c.tp_size) + ", pp_size " + std::to_string(c.pp_size));
  }
  if (c.head_dim != 64 && c.head_dim != 80 && c.head_dim != 96 && c.head_dim != 128) {
    return Unsupported("head_dim " + std::to_string(c.head_dim) +
                       " has no CUDA attention kernel; accepted: 64, 80, 96, 128");
  }
  r->dtype_ = c.dtype == DType::kFloat16 ? DType::kFloat16 : DType::kBFloat16;
  if (c.dtype == DType::kFloat32) LOG_INFO("cuda model runner: fp32 engine runs in bfloat16");
  r->max_tokens_ = std::max<std::int64_t>(c.build.max_num_tokens, c.build.max_batch_size);

  r->gemm_ = std::make_unique<kc::CublasLtGemm>();
  RETURN_IF_ERROR(CublasStatus(r->gemm_->status(), "cuBLASLt init"));
  RETURN_IF_ERROR(r->LoadWeights(engine_dir));
  RETURN_IF_ERROR(r->AllocateWorkspace());

  const std::int64_t tpb = c.build.tokens_per_block;
  const std::int64_t elem = static_cast<std::int64_t>(DTypeSize(r->dtype_));
  const std::int64_t block_bytes_all_layers =
      2 * c.num_layers * c.num_kv_heads * tpb * c.head_dim * elem;
  std::size_t free_b = 0, total_b = 0;
  CUDA_RETURN(cudaMemGetInfo(&free_b, &total_b));
  const auto budget = static_cast<std::int64_t>(static_cast<double>(free_b) *
                                                options.kv_cache_free_gpu_mem_fraction);
  std::int64_t blocks = budget / block_bytes_all_layers;
  if (options.max_kv_tokens > 0) blocks = std::min(blocks, options.max_kv_tokens / tpb);
  if (blocks < 1) {
    return Unavailable("not enough device memory for the KV cache: weights " +
                       MiB(r->weights_buf_.bytes()) + ", activations " + MiB(r->workspace_bytes_) +
                       ", " + MiB(static_cast<std::int64_t>(free_b)) + " free x fraction " +
                       std::to_string(options.kv_cache_free_gpu_mem_fraction) + " = " +
                       MiB(budget) + ", one KV block (all layers) needs " +
                       std::to_string(block_bytes_all_layers) + " bytes; max_kv_tokens " +
                       std::to_string(options.max_kv_tokens));
  }
  r->num_blocks_ = blocks;
  // One more block than the executor sees: the scratch block of graph padding slots.
  r->scratch_block_ = blocks;
  r->pool_elems_ = (blocks + 1) * c.num_kv_heads * tpb * c.head_dim;
  RETURN_IF_ERROR(r->kv_buf_.Allocate((blocks + 1) * block_bytes_all_layers));
  r->bias_cache_ = std::make_unique<EmbeddingBiasCache>(
      c.vocab_size, static_cast<std::size_t>(c.build.max_batch_size));
  // INFLIGHT_CUDA_GRAPHS=0 turns graph replay off (for comparisons and debugging).
  const char* graphs_env = std::getenv("INFLIGHT_CUDA_GRAPHS");
  r->graphs_enabled_ = graphs_env == nullptr || std::string(graphs_env) != "0";
  // INFLIGHT_MIXED_DECODE_SPLIT=0 sends a mixed step's decodes through the context kernel too.
  const char* split_env = std::getenv("INFLIGHT_MIXED_DECODE_SPLIT");
  r->mixed_decode_split_ = split_env == nullptr || std::string(split_env) != "0";
  // INFLIGHT_FUSED_SWIGLU=0 runs prompt-sized gate/up layers through cuBLASLt and the SwiGLU
  // kernel.
  const char* fused_env = std::getenv("INFLIGHT_FUSED_SWIGLU");
  r->fused_swiglu_ = fused_env == nullptr || std::string(fused_env) != "0";
  RETURN_IF_ERROR(r->SetUpAttentionSplit(prop));
  LOG_INFO(
      "cuda model runner on {} ({}): {} {} layers; weights {}, KV pool {} "
      "blocks x {} tokens = {} "
      "tokens ({}), activation workspace {}",
      r->device_name_, prop.name, c.architecture_name, c.num_layers, MiB(r->weights_buf_.bytes()),
      blocks, tpb, blocks * tpb, MiB(r->kv_buf_.bytes()), MiB(r->workspace_bytes_));
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
  for (cudaEvent_t* ev : {&attn_fork_, &attn_join_}) {
    CUDA_RETURN(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  }
  return Status::Ok();
}

Status CudaModelRunner::ValidateStep(const StepInput& input) const {
  RETURN_IF_ERROR(ValidateStepInput(input, config_, num_blocks_));
  std::int64_t total = 0;
  for (const SequenceStep& s : input.sequences) total += static_cast<std::int64_t>(s.tokens.size());
  if (total > max_tokens_) {
    return InvalidArgument("the step has " + std::to_string(total) +
                           " tokens; the engine's max_num_tokens is " +
                           std::to_string(max_tokens_));
  }
  return Status::Ok();
}

Status CudaModelRunner::Norm(void* out, const void* x, const void* w, const void* b,
                             std::int64_t rows) {
  if (config_.norm == NormKind::kRmsNorm) {
    return CudaStatus(kc::RmsNorm(out, x, nullptr, w, dtype_, rows, config_.hidden_size,
                                  config_.norm_eps, stream_),
                      "RmsNorm");
  }
  return CudaStatus(kc::LayerNorm(out, x, nullptr, w, b, dtype_, rows, config_.hidden_size,
                                  config_.norm_eps, stream_),
                    "LayerNorm");
}

Status CudaModelRunner::Linear(void* y, const void* x, const void* w, const void* bias,
                               std::int64_t m, std::int64_t n, std::int64_t k) {
  return CublasStatus(gemm_->Linear(y, dtype_, n, x, k, w, bias, dtype_, m, n, k, stream_),
                      "Linear");
}

Status CudaModelRunner::LinearAdd(void* y, const void* x, const void* w, const void* bias,
                                  std::int64_t m, std::int64_t n, std::int64_t k) {
  return CublasStatus(gemm_->LinearAdd(y, dtype_, n, x, k, w, bias, dtype_, m, n, k, stream_),
                      "LinearAdd");
}

Status CudaModelRunner::Enqueue(const Launch& launch) {
  const EngineConfig& c = config_;
  const kc::PagedBatch& batch = launch.batch;
  const std::int32_t T = batch.num_tokens;
  const kc::PagedKvShape shape{c.num_kv_heads, c.build.tokens_per_block, c.head_dim};

  const std::int64_t H = c.hidden_size, hd = c.head_dim, nq = c.num_attention_heads,
                     nkv = c.num_kv_heads;
  const std::int64_t q_dim = nq * hd, qkv_dim = c.QkvRows(1), inter = c.intermediate_size;
  const bool swiglu = c.activation == Activation::kSwiGlu;
  const std::int64_t e = static_cast<std::int64_t>(DTypeSize(dtype_));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const kc::PagedBatch decodes =
      LeadingDecodes(batch, launch.num_decode_seqs, launch.decode_max_kv_len);
  const kc::PagedBatch contexts = AfterDecodes(batch, launch.num_decode_seqs);

  CUDA_RETURN(kc::EmbeddingGather(residual_.get(), launch.token_ids, T, embed_, H, pos_embed_,
                                  launch.positions, dtype_, stream_));
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const DeviceLayer& l = layers_[i];
    RETURN_IF_ERROR(Norm(normed_.get(), residual_.get(), l.attn_norm, l.attn_norm_bias, T));
    RETURN_IF_ERROR(Linear(qkv_.get(), normed_.get(), l.qkv, l.qkv_bias, T, qkv_dim, H));
    char* q = qkv_.get<char>();
    char* k = q + q_dim * e;
    char* v = k + nkv * hd * e;
    char* k_pool = kv_buf_.get<char>() + static_cast<std::int64_t>(2 * i) * pool_elems_ * e;
    char* v_pool = k_pool + pool_elems_ * e;
    CUDA_RETURN(kc::RopeKvWrite(q, k, v, qkv_dim, nq, k_pool, v_pool, batch, shape,
                                inv_freq_.get<float>(), dtype_, stream_));
    const auto decode_attention = [&](cudaStream_t s) {
      return kc::PagedAttentionDecode(attn_.get(), q, qkv_dim, k_pool, v_pool, decodes, shape, nq,
                                      scale, dtype_, launch.partition, launch.decode_ws,
                                      launch.decode_ws_bytes, s);
    };
    const auto context_attention = [&](cudaStream_t s) {
      return kc::PagedAttentionContext(attn_.get(), q, qkv_dim, k_pool, v_pool, contexts, shape, nq,
                                       scale, dtype_, s);
    };
    if (cudaStream_t side = launch.context_stream) {
      CUDA_RETURN(cudaEventRecord(attn_fork_, stream_));
      CUDA_RETURN(cudaStreamWaitEvent(side, attn_fork_, 0));
      CUDA_RETURN(context_attention(side));
      CUDA_RETURN(cudaEventRecord(attn_join_, side));
      CUDA_RETURN(decode_attention(stream_));
      CUDA_RETURN(cudaStreamWaitEvent(stream_, attn_join_, 0));
    } else {
      if (decodes.num_seqs > 0) CUDA_RETURN(decode_attention(stream_));
      if (contexts.num_seqs > 0) CUDA_RETURN(context_attention(stream_));
    }
    RETURN_IF_ERROR(
        LinearAdd(residual_.get(), attn_.get(), l.attn_out, l.attn_out_bias, T, H, q_dim));
    RETURN_IF_ERROR(Norm(normed_.get(), residual_.get(), l.mlp_norm, l.mlp_norm_bias, T));
    if (swiglu && kc::GemvSupports(dtype_, T, H, H, normed_.get(), l.mlp_in)) {
      // A few rows: the gate/up pass writes the activation directly (no [T, 2 * inter] round trip).
      CUDA_RETURN(kc::GemvSwiGlu(mlp_act_.get(), inter, normed_.get(), H, l.mlp_in, l.mlp_in_bias,
                                 dtype_, T, inter, H, stream_));
    } else if (swiglu && fused_swiglu_ && l.mlp_in_bias == nullptr && T >= kFusedSwiGluMinRows &&
               kc::GemmSwiGluSupports(dtype_, T, inter, H, normed_.get(), H, l.mlp_in,
                                      mlp_act_.get(), inter)) {
      CUDA_RETURN(kc::GemmSwiGlu(mlp_act_.get(), inter, normed_.get(), H, l.mlp_in, dtype_, T,
                                 inter, H, stream_));
    } else if (swiglu) {
      RETURN_IF_ERROR(Linear(mlp_.get(), normed_.get(), l.mlp_in, l.mlp_in_bias, T, 2 * inter, H));
      CUDA_RETURN(kc::SwiGlu(mlp_act_.get(), mlp_.get(), dtype_, T, inter, stream_));
    } else {
      RETURN_IF_ERROR(Linear(mlp_.get(), normed_.get(), l.mlp_in, l.mlp_in_bias, T, inter, H));
      CUDA_RETURN(kc::GeluNew(mlp_act_.get(), mlp_.get(), dtype_, T * inter, stream_));
    }
    RETURN_IF_ERROR(LinearAdd(residual_.get(), mlp_act_.get(), l.down, l.down_bias, T, H, inter));
  }

  // Only the wanted rows go through the final norm and lm_head, logit_chunk_ rows at a time: the
  // row gather is the embedding kernel with the activations as its table. Rows [0, R_out) go to the
  // host; rows [R_out, R) are sampled where they are and only their token ids and log-probs come
  // back.
  const std::int64_t R = launch.num_rows, R_out = launch.num_out_rows;
  for (std::int64_t r0 = 0; r0 < R; r0 += logit_chunk_) {
    const std::int64_t n = std::min(logit_chunk_, R - r0);
    if (launch.logit_rows_are_token_rows) {
      // No gather (a decode step's usual case).
      RETURN_IF_ERROR(Norm(logit_x_.get(), residual_.get<char>() + r0 * H * e, final_norm_,
                           final_norm_bias_, n));
    } else {
      CUDA_RETURN(kc::EmbeddingGather(logit_x_.get(), launch.logit_rows + r0, n, residual_.get(), H,
                                      nullptr, nullptr, dtype_, stream_));
      RETURN_IF_ERROR(Norm(logit_x_.get(), logit_x_.get(), final_norm_, final_norm_bias_, n));
    }
    RETURN_IF_ERROR(
        CublasStatus(gemm_->Linear(logits_.get(), DType::kFloat32, c.vocab_size, logit_x_.get(), H,
                                   lm_head_, nullptr, dtype_, n, c.vocab_size, H, stream_),
                     "lm_head"));
    const std::int64_t n_out = std::clamp<std::int64_t>(R_out - r0, 0, n);
    if (n_out > 0) {
      CUDA_RETURN(cudaMemcpyAsync(launch.host_logits + r0 * c.vocab_size, logits_.get(),
                                  static_cast<std::size_t>(n_out * c.vocab_size) * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
    }
    if (n_out < n) {
      const std::int64_t j = r0 + n_out - R_out;  // first sampled row of this chunk
      CUDA_RETURN(kc::SampleRows(launch.sampled_ids + j, launch.sampled_log_probs + j,
                                 logits_.get<float>() + n_out * c.vocab_size, n - n_out,
                                 c.vocab_size, c.vocab_size, launch.sampling_params + j,
                                 launch.sampling_lists, stream_));
    }
  }
  return Status::Ok();
}

Status CudaModelRunner::Forward(const StepInput& input, StepOutput& out) {
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
  // row, its sequence; parameters and lists go in sampling_batch_.
  std::vector<std::int32_t> sample_rows, sample_seq;
  sampling_batch_.Clear();
  tables.assign(static_cast<std::size_t>(num_seqs) * static_cast<std::size_t>(max_blocks), 0);
  for (std::int32_t i = 0; i < num_seqs; ++i) {
    const SequenceStep& s = input.sequences[static_cast<std::size_t>(i)];
    const std::int32_t first = query_start.back();
    const auto n = static_cast<std::int32_t>(s.tokens.size());
    query_start.push_back(first + n);
    num_cached.push_back(s.num_cached);
    std::copy(s.block_table.begin(), s.block_table.end(),
              tables.begin() + static_cast<std::ptrdiff_t>(i) * max_blocks);
    for (std::int32_t t = 0; t < n; ++t) {
      token_ids.push_back(s.tokens[static_cast<std::size_t>(t)]);
      positions.push_back(s.num_cached + t);
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
      RETURN_IF_ERROR(StageSampling(*s.device_sampling));
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
  const std::size_t o_qs = append(query_start), o_nc = append(num_cached),
                    o_tok = append(token_ids), o_pos = append(positions),
                    o_rows = append(logit_rows), o_tab = append(tables),
                    o_lists = append(sampling_batch_.lists()),
                    o_params = AppendWords(ints, sampling_batch_.params());
  if (static_cast<std::int64_t>(ints.size() * 4) > step_ints_.bytes()) {
    RETURN_IF_ERROR(step_ints_.Allocate(static_cast<std::int64_t>(ints.size() * 4) * 2));
  }
  const auto num_sampled = static_cast<std::int64_t>(sample_rows.size());
  if (num_sampled * 8 > sampled_ids_.bytes()) {
    RETURN_IF_ERROR(sampled_ids_.Allocate(num_sampled * 8));
  }
  auto* d_ints = step_ints_.get<std::int32_t>();
  CUDA_RETURN(
      cudaMemcpyAsync(d_ints, ints.data(), ints.size() * 4, cudaMemcpyHostToDevice, stream_));

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
  Launch l;
  l.batch = batch;
  l.token_ids = d_ints + o_tok;
  l.positions = d_ints + o_pos;
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
    const kc::PagedBatch decodes = LeadingDecodes(batch, num_decodes, decode_max_kv);
    l.partition = kc::DecodePartitionTokens(decodes, c.num_kv_heads);
    const auto ws = static_cast<std::int64_t>(kc::PagedAttentionDecodeWorkspaceBytes(
        decodes, c.num_attention_heads, c.head_dim, l.partition));
    if (ws > decode_ws_.bytes()) RETURN_IF_ERROR(decode_ws_.Allocate(ws));
    l.decode_ws = decode_ws_.get();
    l.decode_ws_bytes = static_cast<std::size_t>(decode_ws_.bytes());
    if (context_streams_ != nullptr && num_decodes < num_seqs) {
      AttentionWork work;
      for (std::int32_t i = 0; i < num_seqs; ++i) {
        const SequenceStep& s = input.sequences[static_cast<std::size_t>(i)];
        if (i < num_decodes) {
          work.decode_bytes += DecodeAttentionBytes(s.num_cached + 1, c.num_kv_heads, c.head_dim,
                                                    static_cast<std::int64_t>(DTypeSize(dtype_)));
        } else {
          work.context_flops +=
              ContextAttentionFlops(static_cast<std::int64_t>(s.tokens.size()), s.num_cached,
                                    c.num_attention_heads, c.head_dim);
        }
      }
      const std::vector<int>& offered = context_streams_->sms();
      const int pick = attention_split_forced_
                           ? static_cast<int>(offered.size() / 2)
                           : ChooseAttentionSplit(work, attention_rates_, offered);
      if (pick >= 0) l.context_stream = context_streams_->stream(static_cast<std::size_t>(pick));
    }
  }
  RETURN_IF_ERROR(Enqueue(l));
  RETURN_IF_ERROR(host_ids_.Reserve(num_sampled * 8));
  const auto* sampled = host_ids_.get<const std::int32_t>();
  if (num_sampled > 0) {
    CUDA_RETURN(cudaMemcpyAsync(host_ids_.get(), sampled_ids_.get(),
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
      out.sampled_tokens[i] = SampledToken(sampled[j]);
      out.sampled_log_probs[i] = std::bit_cast<float>(sampled[sample_seq.size() + j]);
    }
  }
  return Status::Ok();
}

Status CudaModelRunner::WaitForStep(StepOutput& out) {
  CUDA_RETURN(cudaEventRecord(step_end_, stream_));
  const auto start = std::chrono::steady_clock::now();
  CUDA_RETURN(cudaStreamSynchronize(stream_));
  out.device_wait_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  float device_ms = 0;
  CUDA_RETURN(cudaEventElapsedTime(&device_ms, step_begin_, step_end_));
  out.device_ms = device_ms;
  return Status::Ok();
}

Status CudaModelRunner::StageSampling(const DeviceSampling& d) {
  const float* bias = nullptr;
  if (d.embedding_bias) {
    ASSIGN_OR_RETURN(bias, bias_cache_->Get(d.embedding_bias, stream_));
  }
  return sampling_batch_.Add(d, bias);
}

bool CudaModelRunner::GraphEligible(const StepInput& input) const {
  if (!graphs_enabled_ || input.sequences.empty() ||
      input.sequences.size() > static_cast<std::size_t>(config_.build.max_batch_size)) {
    return false;
  }
  const auto max_len = static_cast<std::int32_t>(config_.build.max_seq_len);
  std::size_t list_words = 0;
  for (const SequenceStep& s : input.sequences) {
    if (s.tokens.size() != 1 || !s.device_sampling || s.logits != SequenceStep::Logits::kNone ||
        s.num_cached + 1 > max_len ||
        s.block_table.size() >
            static_cast<std::size_t>((max_len + config_.build.tokens_per_block - 1) /
                                     config_.build.tokens_per_block)) {
      return false;
    }
    list_words += DeviceSamplingBatch::ListWords(*s.device_sampling);
  }
  return list_words <= static_cast<std::size_t>(GraphListWords());
}

Status CudaModelRunner::SetUpGraphs() {
  const EngineConfig& c = config_;
  graph_slots_ = static_cast<std::int32_t>(c.build.max_batch_size);
  graph_blocks_ = static_cast<std::int32_t>((c.build.max_seq_len + c.build.tokens_per_block - 1) /
                                            c.build.tokens_per_block);
  const std::int64_t S = graph_slots_;
  constexpr std::int64_t kParamWords = sizeof(kc::SamplingParams) / 4;
  graph_params_at_ = (5 * S + 1 + 1) / 2 * 2;  // after the per-slot ints, 8-byte aligned
  graph_tables_at_ = graph_params_at_ + S * kParamWords;
  RETURN_IF_ERROR(graph_ints_.Allocate((graph_tables_at_ + S * graph_blocks_) * 4));
  RETURN_IF_ERROR(graph_ids_.Allocate(S * 8));
  RETURN_IF_ERROR(graph_lists_.Allocate(GraphListWords() * 4));
  std::vector<std::int32_t> constant(static_cast<std::size_t>(2 * S + 1));
  for (std::int64_t i = 0; i <= S; ++i)
    constant[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  for (std::int64_t i = 0; i < S; ++i)
    constant[static_cast<std::size_t>(S + 1 + i)] = static_cast<std::int32_t>(i);
  CUDA_RETURN(
      cudaMemcpy(graph_ints_.get(), constant.data(), constant.size() * 4, cudaMemcpyHostToDevice));
  // One attention workspace, as large as the largest (batch, key) bucket needs, so that no graph's
  // pointers ever move. Splits past a sequence's length exit at once.
  std::int64_t ws = 0;
  for (std::int32_t b = 1;; b = std::min(2 * b, graph_slots_)) {
    for (std::int32_t keys = GraphKeys(1);; keys = GraphKeys(2 * keys)) {
      const kc::PagedBatch batch = GraphBatch(b, keys);
      const std::int32_t partition = kc::DecodePartitionTokens(batch, c.num_kv_heads);
      ws = std::max(ws, static_cast<std::int64_t>(kc::PagedAttentionDecodeWorkspaceBytes(
                            batch, c.num_attention_heads, c.head_dim, partition)));
      if (keys == GraphKeys(keys + 1)) break;  // max_seq_len
    }
    if (b == graph_slots_) break;
  }
  RETURN_IF_ERROR(graph_ws_.Allocate(ws));
  graphs_ready_ = true;
  LOG_INFO(
      "cuda model runner: decode CUDA graphs for batch buckets up to {}, attention workspace {}",
      graph_slots_, MiB(ws));
  return Status::Ok();
}

kc::PagedBatch CudaModelRunner::GraphBatch(std::int32_t seqs, std::int32_t keys) const {
  kc::PagedBatch batch;
  batch.num_seqs = seqs;
  batch.num_tokens = seqs;
  batch.max_query_len = 1;
  batch.max_kv_len = keys;
  batch.max_blocks_per_seq = graph_blocks_;
  return batch;
}

std::int32_t CudaModelRunner::GraphKeys(std::int32_t max_kv_len) const {
  const auto max_seq = static_cast<std::int32_t>(config_.build.max_seq_len);
  std::int32_t keys = kMinGraphKeys;
  while (keys < max_kv_len && keys < max_seq) keys *= 2;
  return std::min(keys, max_seq);
}

Status CudaModelRunner::DecodeWithGraph(const StepInput& input, StepOutput& out) {
  if (!graphs_ready_) RETURN_IF_ERROR(SetUpGraphs());
  const EngineConfig& c = config_;
  const auto n = static_cast<std::int32_t>(input.sequences.size());
  std::int32_t bucket = 1;
  while (bucket < n) bucket *= 2;
  bucket = std::min(bucket, graph_slots_);
  const std::int64_t S = graph_slots_;
  // One upload of graph_ints_ from the per-slot ints to the bucket's last table row: per slot
  // num_cached, token, position; the SamplingParams; the block tables. Padding slots decode
  // greedily from position 0 of the scratch block. The lists go to graph_lists_.
  const std::int64_t slots_at = 2 * S + 1;
  std::vector<std::int32_t> step(
      static_cast<std::size_t>(graph_tables_at_ + std::int64_t{bucket} * graph_blocks_ - slots_at),
      0);
  const auto word = [&](std::int64_t at) -> std::int32_t& {
    return step[static_cast<std::size_t>(at - slots_at)];
  };
  std::fill(step.begin() + (graph_tables_at_ - slots_at), step.end(),
            static_cast<std::int32_t>(scratch_block_));
  sampling_batch_.Clear();
  for (std::int32_t i = 0; i < n; ++i) {
    const SequenceStep& s = input.sequences[static_cast<std::size_t>(i)];
    word(slots_at + i) = s.num_cached;
    word(slots_at + S + i) = s.tokens[0];
    word(slots_at + 2 * S + i) = s.num_cached;
    RETURN_IF_ERROR(StageSampling(*s.device_sampling));
    std::copy(s.block_table.begin(), s.block_table.end(),
              step.begin() + (graph_tables_at_ + std::int64_t{i} * graph_blocks_ - slots_at));
  }
  for (std::int32_t i = n; i < bucket; ++i) sampling_batch_.AddPadding();
  std::memcpy(&word(graph_params_at_), sampling_batch_.params().data(),
              sampling_batch_.params().size() * sizeof(kc::SamplingParams));
  auto* d_ints = graph_ints_.get<std::int32_t>();
  auto* d_slots = d_ints + slots_at;
  CUDA_RETURN(
      cudaMemcpyAsync(d_slots, step.data(), step.size() * 4, cudaMemcpyHostToDevice, stream_));
  const std::vector<std::int32_t>& lists = sampling_batch_.lists();
  if (!lists.empty()) {
    CUDA_RETURN(cudaMemcpyAsync(graph_lists_.get(), lists.data(), lists.size() * 4,
                                cudaMemcpyHostToDevice, stream_));
  }

  std::int32_t max_kv = 1;
  for (const SequenceStep& s : input.sequences) max_kv = std::max(max_kv, s.num_cached + 1);
  const std::int32_t keys = GraphKeys(max_kv);
  auto it = graphs_.find({bucket, keys});
  if (it != graphs_.end()) {
    CUDA_RETURN(cudaGraphLaunch(it->second, stream_));
  } else {
    Launch l;
    l.batch = GraphBatch(bucket, keys);
    l.batch.query_start = d_ints;
    l.batch.num_cached = d_slots;
    l.batch.block_tables = d_ints + graph_tables_at_;
    l.token_ids = d_slots + S;
    l.positions = d_slots + 2 * S;
    l.logit_rows = d_ints + S + 1;
    l.num_rows = bucket;
    l.logit_rows_are_token_rows = true;  // the constant 0, 1, ... of graph_ints_
    l.sampling_params = reinterpret_cast<const kc::SamplingParams*>(d_ints + graph_params_at_);
    l.sampling_lists = graph_lists_.get<std::int32_t>();
    // The bucket's ids, then its log-probs.
    l.sampled_ids = graph_ids_.get<std::int32_t>();
    l.sampled_log_probs = graph_ids_.get<float>() + bucket;
    l.num_decode_seqs = bucket;
    l.decode_max_kv_len = l.batch.max_kv_len;
    l.partition = kc::DecodePartitionTokens(l.batch, c.num_kv_heads);
    l.decode_ws = graph_ws_.get();
    l.decode_ws_bytes = static_cast<std::size_t>(graph_ws_.bytes());
    // First use of the bucket: run it as is (which also warms up cuBLASLt's plans and loads the
    // kernels), then record the same launches into the bucket's graph.
    RETURN_IF_ERROR(Enqueue(l));
    CUDA_RETURN(cudaStreamSynchronize(stream_));
    cudaGraph_t graph = nullptr;
    CUDA_RETURN(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const Status recorded = Enqueue(l);
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    cudaGraphExec_t exec = nullptr;
    Status made = recorded;
    if (made.ok()) made = CudaStatus(ended, "cudaStreamEndCapture");
    if (made.ok()) made = CudaStatus(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (made.ok()) {
      graphs_[{bucket, keys}] = exec;
      LOG_INFO("cuda model runner: captured the decode graph of batch bucket {}, keys up to {}",
               bucket, keys);
    } else {
      // This step's tokens are already computed; later steps run without graphs.
      LOG_WARN("cuda model runner: decode graph capture failed, graphs off: {}", made.ToString());
      cudaGetLastError();
      graphs_enabled_ = false;
    }
  }
  RETURN_IF_ERROR(host_ids_.Reserve(std::int64_t{bucket + n} * 4));
  const auto* sampled = host_ids_.get<const std::int32_t>();
  CUDA_RETURN(cudaMemcpyAsync(host_ids_.get(), graph_ids_.get(),
                              static_cast<std::size_t>(bucket + n) * 4, cudaMemcpyDeviceToHost,
                              stream_));
  RETURN_IF_ERROR(WaitForStep(out));
  out.row_begin.assign(static_cast<std::size_t>(n), 0);
  out.sampled_tokens.resize(static_cast<std::size_t>(n));
  out.sampled_log_probs.resize(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    out.sampled_tokens[static_cast<std::size_t>(i)] = SampledToken(sampled[i]);
    out.sampled_log_probs[static_cast<std::size_t>(i)] =
        std::bit_cast<float>(sampled[static_cast<std::size_t>(bucket + i)]);
  }
  return Status::Ok();
}

Result<StepOutput> CudaModelRunner::Step(const StepInput& input) {
  std::lock_guard<std::mutex> lock(step_mutex_);
  RETURN_IF_ERROR(ValidateStep(input));
  CUDA_RETURN(cudaSetDevice(device_));
  StepOutput out;
  out.vocab_size = config_.vocab_size;
  if (input.sequences.empty()) return out;
  bias_cache_->BeginStep();  // the previous step's work is done: expired biases can go
  CUDA_RETURN(cudaEventRecord(step_begin_, stream_));
  if (GraphEligible(input)) {
    RETURN_IF_ERROR(DecodeWithGraph(input, out));
  } else {
    RETURN_IF_ERROR(Forward(input, out));
  }
  return out;
}

}  // namespace

bool CudaDeviceAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

Result<std::unique_ptr<ModelRunner>> CreateCudaModelRunner(const std::string& engine_dir,
                                                           const CudaRunnerOptions& options) {
  ASSIGN_OR_RETURN(auto runner, CudaModelRunner::Create(engine_dir, options));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace inflight::model
