#include "backend/response_converter.h"

#include <algorithm>

#include "common/dtype.h"

namespace inflight::backend {
namespace {

class OutputBuilder {
 public:
  OutputBuilder(const RowOutputContext& ctx, const std::set<std::string>& requested,
                std::vector<HostTensor>& out)
      : ctx_(ctx), requested_(requested), out_(out) {}

  bool Wants(const char* name) const { return requested_.count(name) != 0; }

  template <typename T>
  void Add(const char* name, TRITONSERVER_DataType dtype, std::vector<std::int64_t> shape,
           const std::vector<T>& values) {
    if (!Wants(name)) return;
    if (ctx_.batched) shape.insert(shape.begin(), 1);
    out_.push_back(HostTensor::From<T>(name, dtype, std::move(shape), values));
  }

  void AddScalarI32(const char* name, std::int32_t v) {
    Add<std::int32_t>(name, TRITONSERVER_TYPE_INT32, {1}, {v});
  }
  void AddScalarI64(const char* name, std::int64_t v) {
    Add<std::int64_t>(name, TRITONSERVER_TYPE_INT64, {1}, {v});
  }

  void AddLogits(const char* name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
    if (ctx_.logits_dtype == TRITONSERVER_TYPE_FP16) {
      std::vector<std::uint16_t> half(v.size());
      ConvertFromFloat(DType::kFloat16, v.data(), half.data(), v.size());
      Add<std::uint16_t>(name, TRITONSERVER_TYPE_FP16, std::move(shape), half);
    } else {
      Add<float>(name, TRITONSERVER_TYPE_FP32, std::move(shape), v);
    }
  }

 private:
  const RowOutputContext& ctx_;
  const std::set<std::string>& requested_;
  std::vector<HostTensor>& out_;
};

// Pads per-beam rows to one length.
template <typename T>
std::vector<T> PadRows(const std::vector<std::vector<T>>& rows, std::size_t width, T pad) {
  std::vector<T> flat(rows.size() * width, pad);
  for (std::size_t b = 0; b < rows.size(); ++b) {
    std::copy(rows[b].begin(), rows[b].end(),
              flat.begin() + static_cast<std::ptrdiff_t>(b * width));
  }
  return flat;
}

template <typename T>
std::size_t MaxRowLength(const std::vector<std::vector<T>>& rows) {
  std::size_t n = 0;
  for (const auto& r : rows) n = std::max(n, r.size());
  return n;
}

}  // namespace

std::vector<HostTensor> BuildOutputs(const ResponseResult& result, const RowOutputContext& ctx,
                                     const std::set<std::string>& requested) {
  std::vector<HostTensor> out;
  OutputBuilder b(ctx, requested, out);
  const auto beams = static_cast<std::int64_t>(result.output_token_ids.size());

  const std::size_t max_len = MaxRowLength(result.output_token_ids);
  b.Add<std::int32_t>("output_ids", TRITONSERVER_TYPE_INT32,
                      {beams, static_cast<std::int64_t>(max_len)},
                      PadRows<std::int32_t>(result.output_token_ids, max_len, -1));
  std::vector<std::int32_t> lengths;
  for (const auto& r : result.output_token_ids)
    lengths.push_back(static_cast<std::int32_t>(r.size()));
  b.Add<std::int32_t>("sequence_length", TRITONSERVER_TYPE_INT32, {beams}, lengths);

  if (!result.cum_log_probs.empty()) {
    b.Add<float>("cum_log_probs", TRITONSERVER_TYPE_FP32,
                 {static_cast<std::int64_t>(result.cum_log_probs.size())}, result.cum_log_probs);
  }
  if (!result.log_probs.empty()) {
    const std::size_t n = MaxRowLength(result.log_probs);
    b.Add<float>("output_log_probs", TRITONSERVER_TYPE_FP32,
                 {static_cast<std::int64_t>(result.log_probs.size()), static_cast<std::int64_t>(n)},
                 PadRows<float>(result.log_probs, n, 0.0f));
  }
  const std::int64_t vocab = result.vocab_size;
  if (!result.context_logits.empty() && vocab > 0) {
    b.AddLogits("context_logits",
                {static_cast<std::int64_t>(result.context_logits.size()) / vocab, vocab},
                result.context_logits);
  }
  if (!result.generation_logits.empty() && vocab > 0 && beams > 0) {
    const std::int64_t steps =
        static_cast<std::int64_t>(result.generation_logits.size()) / vocab / beams;
    b.AddLogits("generation_logits", {beams, steps, vocab}, result.generation_logits);
  }
  if (ctx.report_batch_index) b.AddScalarI32("batch_index", ctx.batch_index);
  b.AddScalarI32("sequence_index", result.sequence_index);
  if (ctx.return_perf_metrics) {
    b.AddScalarI32("kv_cache_alloc_new_blocks", result.kv_cache_alloc_new_blocks);
    b.AddScalarI32("kv_cache_reused_blocks", result.kv_cache_reused_blocks);
    b.AddScalarI32("kv_cache_alloc_total_blocks", result.kv_cache_alloc_total_blocks);
    b.AddScalarI64("arrival_time_ns", result.arrival_time_ns);
    b.AddScalarI64("first_scheduled_time_ns", result.first_scheduled_time_ns);
    b.AddScalarI64("first_token_time_ns", result.first_token_time_ns);
    b.AddScalarI64("last_token_time_ns", result.last_token_time_ns);
  }
  return out;
}

}  // namespace inflight::backend
