#include "executor/response_builder.h"

namespace inflight::executor {
namespace {

void FillCommon(const RequestState& state, ResponseResult& r, SizeType vocab_size, bool is_final) {
  r.is_final = is_final;
  r.vocab_size = vocab_size;
  r.finish_reasons = {state.finish_reason};
  const SequenceKvStats& kv = state.sequence.kv_stats;
  r.kv_cache_alloc_new_blocks = static_cast<SizeType>(kv.alloc_new_blocks);
  r.kv_cache_reused_blocks = static_cast<SizeType>(kv.reused_blocks);
  r.kv_cache_alloc_total_blocks = static_cast<SizeType>(kv.alloc_total_blocks);
  r.arrival_time_ns = state.arrival_time_ns;
  r.first_scheduled_time_ns = state.first_scheduled_time_ns;
  r.first_token_time_ns = state.first_token_time_ns;
  r.last_token_time_ns = state.last_token_time_ns;
  if (state.request.output_config.return_log_probs) r.cum_log_probs = {state.cum_log_prob};
}

}  // namespace

Response MakeStreamingResponse(RequestState& state, bool is_final, SizeType vocab_size) {
  Response resp;
  resp.request_id = state.sequence.id;
  ResponseResult& r = resp.result;
  FillCommon(state, r, vocab_size, is_final);
  auto generated = state.sequence.generated();
  const auto from = static_cast<std::size_t>(state.num_streamed_tokens);
  r.output_token_ids = {
      VecTokens(generated.begin() + static_cast<std::ptrdiff_t>(from), generated.end())};
  if (state.request.output_config.return_log_probs) {
    r.log_probs = {std::vector<float>(state.log_probs.begin() + static_cast<std::ptrdiff_t>(from),
                                      state.log_probs.end())};
  }
  if (state.request.output_config.return_generation_logits) {
    const auto row = static_cast<std::size_t>(state.num_streamed_logit_rows) *
                     static_cast<std::size_t>(vocab_size);
    r.generation_logits.assign(state.generation_logits.begin() + static_cast<std::ptrdiff_t>(row),
                               state.generation_logits.end());
    state.num_streamed_logit_rows = static_cast<SizeType>(state.generation_logits.size() /
                                                          static_cast<std::size_t>(vocab_size));
  }
  // Context logits travel once, with the first streamed response.
  if (state.num_streamed_tokens == 0 && state.request.output_config.return_context_logits) {
    r.context_logits = state.context_logits;
  }
  state.num_streamed_tokens = static_cast<SizeType>(generated.size());
  return resp;
}

Response MakeFinalResponse(const RequestState& state, SizeType vocab_size) {
  Response resp;
  resp.request_id = state.sequence.id;
  ResponseResult& r = resp.result;
  FillCommon(state, r, vocab_size, true);
  const Sequence& seq = state.sequence;
  if (state.request.output_config.exclude_input_from_output) {
    r.output_token_ids = {VecTokens(seq.generated().begin(), seq.generated().end())};
  } else {
    r.output_token_ids = {seq.tokens};
  }
  if (state.request.output_config.return_log_probs) r.log_probs = {state.log_probs};
  if (state.request.output_config.return_context_logits) r.context_logits = state.context_logits;
  if (state.request.output_config.return_generation_logits)
    r.generation_logits = state.generation_logits;
  return resp;
}

Response MakeErrorResponse(IdType id, Status error) {
  Response resp;
  resp.request_id = id;
  resp.error = std::move(error);
  return resp;
}

}  // namespace inflight::executor
