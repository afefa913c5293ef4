// Everything the executor keeps about one request while it runs: the request, its sequence (tokens
// and KV progress), its random stream, and what it has produced but not yet sent.
#pragma once

#include <cstdint>
#include <vector>

#include "common/steady_clock.h"
#include "executor/sampling/sampler.h"
#include "executor/sampling/stop_criteria.h"
#include "executor/sequence.h"
#include "inflight/executor.h"

namespace inflight::executor {

struct RequestState {
  RequestState(IdType id, Request req, std::int64_t arrival_ns)
      : request(std::move(req)),
        sequence(id, request.input_token_ids, request.max_tokens),
        sampler(sampling::SamplerState::FromConfig(request.sampling_config)),
        criteria(sampling::MakeStopCriteria(request)),
        arrival_time_ns(arrival_ns) {
    sequence.return_context_logits = request.output_config.return_context_logits;
  }

  Request request;
  Sequence sequence;
  sampling::SamplerState sampler;
  sampling::StopCriteria criteria;  // views into `request`

  std::vector<float> log_probs;  // one per generated token
  float cum_log_prob = 0.0f;
  std::vector<float> context_logits;     // [rows so far, vocab]
  std::vector<float> generation_logits;  // [generated, vocab]
  SizeType num_streamed_tokens = 0;      // generated tokens already sent (streaming)
  SizeType num_streamed_logit_rows = 0;  // generation logits rows already sent (streaming)
  FinishReason finish_reason = FinishReason::kNotFinished;

  std::int64_t arrival_time_ns = 0;
  std::int64_t first_scheduled_time_ns = 0;
  std::int64_t first_token_time_ns = 0;
  std::int64_t last_token_time_ns = 0;
};

}  // namespace inflight::executor
