// Builds the executor's Responses from a request's state: streaming (only what is new) or final.
#pragma once

#include "executor/request_state.h"
#include "inflight/executor.h"

namespace inflight::executor {

// A streaming response with the tokens (and log-probs, logits) generated since the last one;
// advances the state's streaming cursors. `is_final` marks the request's last response.
Response MakeStreamingResponse(RequestState& state, bool is_final, SizeType vocab_size);

// The one response of a non-streaming request: the whole output (the prompt first unless excluded).
Response MakeFinalResponse(const RequestState& state, SizeType vocab_size);

Response MakeErrorResponse(IdType id, Status error);

}  // namespace inflight::executor
