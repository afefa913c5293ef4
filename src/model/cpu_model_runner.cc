#include "model/cpu_model_runner.h"

#include <unistd.h>

#include <cstdlib>

#include "common/logging.h"
#include "model/attention_windows.h"
#include "model/rank_weights.h"
#include "model/step_validation.h"

namespace inflight::model {
namespace {

// calloc hands back untouched zero pages: without this the KV pools would enter the resident set
// block by block as the block manager first hands each one out (its free list prefers blocks never
// used, to keep reusable prefixes), so RSS would climb for minutes of serving, and a machine short
// of memory would fail mid-request instead of at load. Writing one byte per page commits the pool
// now, as the GPU runner's up-front allocation does.
void CommitPages(void* p, std::size_t bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  const std::size_t step = page > 0 ? static_cast<std::size_t>(page) : 4096;
  auto* bytes_p = static_cast<volatile unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; i += step) bytes_p[i] = 0;
}

}  // namespace

Result<std::unique_ptr<CpuModelRunner>> CpuModelRunner::Create(const std::string& engine_dir,
                                                               const RunnerOptions& options) {
  std::unique_ptr<CpuModelRunner> r(new CpuModelRunner());
  ASSIGN_OR_RETURN(r->config_, LoadEngineConfig(engine_dir));
  const EngineConfig& c = r->config_;
  const std::int64_t tpb = c.build.tokens_per_block;
  if (tpb < 1) {
    return InvalidArgument("engine build.tokens_per_block is " + std::to_string(tpb) +
                           ", must be >= 1");
  }
  r->num_blocks_ = options.max_kv_tokens / tpb;
  if (r->num_blocks_ < 1) {
    return InvalidArgument("max_kv_tokens " + std::to_string(options.max_kv_tokens) +
                           " holds no KV block of tokens_per_block " + std::to_string(tpb) +
                           " tokens; it must be >= " + std::to_string(tpb));
  }
  r->collectives_ = options.collectives != nullptr ? options.collectives
                                                   : std::make_shared<SingleProcessCollectives>();
  const Collectives& group = *r->collectives_;
  ASSIGN_OR_RETURN(r->shard_, MakeModelShard(c, group.tp_rank(), group.tp_size(), group.pp_rank(),
                                             group.pp_size()));
  ASSIGN_OR_RETURN(std::vector<kernels::cpu::AttentionWindow> windows,
                   ResolveAttentionWindows(c, options.attention_limits));
  ASSIGN_OR_RETURN(r->weights_file_, OpenRankWeights(engine_dir, c, r->shard_));
  ASSIGN_OR_RETURN(TransformerWeights weights,
                   BindTransformerWeights(c, r->shard_, *r->weights_file_));
  r->weight_bytes_ = weights.num_bytes;

  r->pool_floats_ = r->num_blocks_ * r->shard_.num_kv_heads * tpb * c.head_dim;
  // An FP8 KV cache holds E4M3 bytes: a quarter of the fp32 pools (a half of the GPU's bf16).
  const bool fp8 = c.quant.kv_cache_fp8;
  r->kv_elem_bytes_ = fp8 ? 1 : 4;
  const auto n = static_cast<std::size_t>(r->pool_floats_);
  for (std::int64_t i = 0; i < r->shard_.num_layers(); ++i) {
    LayerKvPools p;
    if (fp8) {
      p.k8 = static_cast<std::uint8_t*>(std::calloc(n, 1));
      p.v8 = static_cast<std::uint8_t*>(std::calloc(n, 1));
    } else {
      p.k = static_cast<float*>(std::calloc(n, sizeof(float)));
      p.v = static_cast<float*>(std::calloc(n, sizeof(float)));
    }
    r->kv_.push_back(p);  // pushed before the check so the destructor frees a partial allocation
    if ((fp8 ? p.k8 == nullptr || p.v8 == nullptr : p.k == nullptr || p.v == nullptr)) {
      return Unavailable("cannot allocate the KV cache: " + std::to_string(r->shard_.num_layers()) +
                         " layers x 2 pools x " +
                         std::to_string(r->pool_floats_ * r->kv_elem_bytes_) +
                         " bytes (max_kv_tokens " + std::to_string(options.max_kv_tokens) + ")");
    }
    const std::size_t pool_bytes = n * static_cast<std::size_t>(r->kv_elem_bytes_);
    CommitPages(fp8 ? static_cast<void*>(p.k8) : p.k, pool_bytes);
    CommitPages(fp8 ? static_cast<void*>(p.v8) : p.v, pool_bytes);
  }
  r->pool_ = std::make_unique<kernels::cpu::ThreadPool>(options.num_threads);
  const std::string window_text = DescribeAttentionWindows(windows);
  r->transformer_ = std::make_unique<Transformer>(
      c, r->shard_, std::move(weights), std::move(windows), tpb, r->pool_.get(), *r->collectives_);
  if (options.observe_amax != nullptr) {
    r->observe_amax_ = options.observe_amax;
    RETURN_IF_ERROR(PrepareObservedAmax(*r->observe_amax_, c.num_layers));
    r->transformer_->ObserveAmax(r->observe_amax_.get());
  }
  LOG_INFO(
      "cpu model runner: {} ({} layers, hidden {}{}), {} KV blocks of {} tokens{}, {} threads{}",
      c.architecture_name, c.num_layers, c.hidden_size,
      c.quant.quantized_weights()
          ? std::string(", ") + QuantAlgoName(c.quant.quant_algo) + " weights dequantized"
          : std::string(),
      r->num_blocks_, tpb, fp8 ? " (fp8)" : "", r->pool_->num_threads(),
      window_text.empty() ? "" : "; attention windows: " + window_text);
  return r;
}

CpuModelRunner::~CpuModelRunner() {
  for (auto& p : kv_) {
    std::free(p.k);
    std::free(p.v);
    std::free(p.k8);
    std::free(p.v8);
  }
}

std::int64_t CpuModelRunner::memory_bytes() const {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  return weight_bytes_ + 2 * static_cast<std::int64_t>(kv_.size()) * pool_floats_ * kv_elem_bytes_ +
         transformer_->workspace_bytes();
}

Result<StepOutput> CpuModelRunner::Step(const StepInput& input) {
  std::lock_guard<std::mutex> lock(step_mutex_);
  RETURN_IF_ERROR(Launch(input));
  return Complete();
}

std::int32_t CpuModelRunner::max_steps_in_flight() const {
  return shard_.pp_size > 1 && shard_.first_stage() ? shard_.pp_size : 1;
}

Result<StepOutput> CpuModelRunner::Complete() {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  if (in_flight_.empty()) return Internal("CpuModelRunner::Complete without a launched step");
  std::unique_ptr<LaunchedStep> step = std::move(in_flight_.front());
  in_flight_.pop_front();
  if (step->awaiting_logits) RETURN_IF_ERROR(collectives_->FinishReceiveFromLastStage());
  return std::move(step->out);
}

Status CpuModelRunner::Launch(const StepInput& input) {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  RETURN_IF_ERROR(ValidateStepInput(input, config_, num_blocks_));
  const auto num_seqs = static_cast<std::int32_t>(input.sequences.size());

  // Flatten the step into the kernels' page-table format (kernels/cpu/paged_kv.h).
  std::int32_t max_blocks = 1;
  for (const auto& s : input.sequences)
    max_blocks = std::max(max_blocks, static_cast<std::int32_t>(s.block_table.size()));
  std::vector<std::int32_t> query_start{0}, num_cached, tables, token_ids, positions, logit_rows;
  tables.assign(static_cast<std::size_t>(num_seqs) * max_blocks, 0);
  auto step = std::make_unique<LaunchedStep>();
  StepOutput& out = step->out;
  out.vocab_size = config_.vocab_size;
  for (std::int32_t i = 0; i < num_seqs; ++i) {
    const SequenceStep& s = input.sequences[i];
    const std::int32_t first_row = query_start.back();
    const auto n = static_cast<std::int32_t>(s.tokens.size());
    query_start.push_back(first_row + n);
    num_cached.push_back(s.num_cached);
    std::copy(s.block_table.begin(), s.block_table.end(),
              tables.begin() + static_cast<std::ptrdiff_t>(i) * max_blocks);
    for (std::int32_t t = 0; t < n; ++t) {
      token_ids.push_back(s.tokens[t]);
      positions.push_back(s.num_cached + t);
    }
    out.row_begin.push_back(static_cast<std::int32_t>(logit_rows.size()));
    if (s.logits == SequenceStep::Logits::kLast) {
      logit_rows.push_back(first_row + n - 1);
    } else if (s.logits == SequenceStep::Logits::kAll) {
      for (std::int32_t t = 0; t < n; ++t) logit_rows.push_back(first_row + t);
    }
  }
  ForwardBatch batch;
  batch.paged.num_seqs = num_seqs;
  batch.paged.query_start = query_start.data();
  batch.paged.num_cached = num_cached.data();
  batch.paged.block_tables = tables.data();
  batch.paged.max_blocks_per_seq = max_blocks;
  batch.token_ids = token_ids.data();
  batch.positions = positions.data();
  batch.logit_rows = logit_rows.data();
  batch.num_logit_rows = static_cast<std::int32_t>(logit_rows.size());
  out.logits.resize(logit_rows.size() * static_cast<std::size_t>(config_.vocab_size));
  RETURN_IF_ERROR(transformer_->Forward(batch, kv_, out.logits.data()));
  RETURN_IF_ERROR(ReturnToFirstStage(*step));
  in_flight_.push_back(std::move(step));
  return Status::Ok();
}

// A pipeline's logits are computed by its last stage; they travel back to the first stage, whose
// ranks answer the step (model_runner.h). A stage in between computed none and returns none.
Status CpuModelRunner::ReturnToFirstStage(LaunchedStep& step) {
  if (shard_.pp_size == 1) return Status::Ok();
  StepOutput& out = step.out;
  const auto count = static_cast<std::int64_t>(out.logits.size());
  if (shard_.last_stage()) {
    if (count == 0) return Status::Ok();
    return collectives_->SendToFirstStage(out.logits.data(), count, DType::kFloat32, nullptr);
  }
  if (shard_.first_stage()) {
    if (count == 0) return Status::Ok();
    // The logits land in `out` (kept by in_flight_, so its buffer does not move) by Complete.
    RETURN_IF_ERROR(collectives_->StartReceiveFromLastStage(out.logits.data(), count,
                                                            DType::kFloat32, nullptr));
    step.awaiting_logits = true;
    return Status::Ok();
  }
  out.logits.clear();
  return Status::Ok();
}

Result<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const std::string& engine_dir,
                                                          const RunnerOptions& options) {
  ASSIGN_OR_RETURN(auto runner, CpuModelRunner::Create(engine_dir, options));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace inflight::model
