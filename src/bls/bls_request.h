// One tensorrt_llm_bls request in flight: its rows, each generating through its own call to the
// tensorrt_llm model, and the responses they send back through the request's response factory.
//
//   row 0: text -> ids -> LlmCall -> output_ids ... -> text_output (+ log-probs, logits) ->
//   response row 1: ...                                                        (batch_index 1) all
//   rows done -> FINAL
//
// Streaming rows send one response per response of tensorrt_llm with the text those tokens settle
// (accumulate_tokens: all the text so far), never a character cut in two; the rest goes out when
// the row ends. A model that is not decoupled sends its one response with FINAL.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bls/bls_config.h"
#include "bls/bls_inputs.h"
#include "bls/llm_call.h"
#include "bls/raw_tensor.h"
#include "tokenizer/tokenizer.h"
#include "triton/core/tritonbackend.h"

namespace inflight::bls {

// What every request of a model shares.
struct BlsModel {
  BlsConfig config;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<HostAllocator> allocator;
  TRITONSERVER_Server* server = nullptr;
};

class BlsRequest : public std::enable_shared_from_this<BlsRequest> {
 public:
  // Takes the factory (deleted when the request ends).
  BlsRequest(const BlsModel& model, TRITONBACKEND_ResponseFactory* factory, std::string id);
  ~BlsRequest();

  // Starts a call to tensorrt_llm for each row. An error means nothing was started and nothing
  // was sent: the caller answers with it.
  Status Start(std::vector<RowRequest> rows);

  // Whether the client went away (or the server cancelled the request).
  bool ClientCancelled() const;
  // Cancels every row's call to tensorrt_llm.
  void CancelCalls();
  bool Done() const { return done_.load(); }

 private:
  class Row;
  friend class Row;

  // From the rows' callbacks (any thread).
  void Send(std::vector<RawTensor> outputs);
  void RowDone();
  void Fail(const Status& status);
  // Sends `status` as the request's last response; returns the calls to cancel (outside mu_).
  std::vector<std::shared_ptr<LlmCall>> FailLocked(const Status& status);
  Status SendLocked(const std::vector<RawTensor>& outputs, uint32_t flags);
  void FinishLocked();

  const BlsModel& model_;
  TRITONBACKEND_ResponseFactory* factory_;
  const std::string id_;
  std::vector<std::shared_ptr<LlmCall>> calls_;

  std::mutex mu_;  // serializes everything sent through the factory
  int rows_open_ = 0;
  bool failed_ = false;
  std::optional<std::vector<RawTensor>> held_;  // not decoupled: the answer waits for FINAL
  std::atomic<bool> done_{false};
};

}  // namespace inflight::bls
