#include "bls/bls_request.h"

#include <algorithm>
#include <cstring>

#include "backend/triton_error.h"
#include "common/logging.h"
#include "tokenizer/stream_decoder.h"

namespace inflight::bls {
namespace {

using backend::FromTritonError;
using backend::ToTritonError;

// Outputs of tensorrt_llm that tensorrt_llm_bls answers as they are, when its configuration
// declares them (NVIDIA's BLS passes these on; the perf metrics came with return_perf_metrics).
constexpr const char* kPassedOn[] = {
    "cum_log_probs",          "output_log_probs",
    "context_logits",         "generation_logits",
    "sequence_index",         "kv_cache_alloc_new_blocks",
    "kv_cache_reused_blocks", "kv_cache_alloc_total_blocks",
    "arrival_time_ns",        "first_scheduled_time_ns",
    "first_token_time_ns",    "last_token_time_ns",
    "acceptance_rate",        "total_accepted_draft_tokens",
    "total_draft_tokens",
};

// What tensorrt_llm is asked for: what the BLS answers with, and what it reads.
std::vector<std::string> LlmOutputNames(const BlsConfig& config) {
  std::vector<std::string> out = {"output_ids", "sequence_length"};
  for (const char* name : kPassedOn) {
    if (std::find(config.outputs.begin(), config.outputs.end(), name) != config.outputs.end()) {
      out.emplace_back(name);
    }
  }
  return out;
}

std::vector<int32_t> Int32Values(const RawTensor& t) {
  std::vector<int32_t> out(t.data.size() / sizeof(int32_t));
  if (!out.empty()) std::memcpy(out.data(), t.data.data(), out.size() * sizeof(int32_t));
  return out;
}

}  // namespace

// One row: tokens from its LlmCall in, text out.
class BlsRequest::Row : public LlmSink {
 public:
  Row(std::shared_ptr<BlsRequest> parent, const RowRequest& request)
      : parent_(std::move(parent)),
        row_(request.row),
        stream_(request.stream),
        text_(*parent_->model_.tokenizer, parent_->model_.config.skip_special_tokens) {}

  void OnLlmResponse(std::vector<RawTensor> outputs, bool final) override {
    if (parent_->ClientCancelled()) parent_->CancelCalls();
    auto response = Convert(std::move(outputs), final);
    if (!response.ok()) return parent_->Fail(response.status());
    parent_->Send(std::move(*response));
  }

  void OnLlmError(const Status& status) override { parent_->Fail(status); }

  void OnLlmDone() override {
    if (stream_ && !flushed_) {
      const std::string rest = text_.Finish();
      if (!rest.empty()) parent_->Send(TextOnly(Accumulate() ? text_.text() : rest));
    }
    parent_->RowDone();
    parent_.reset();  // the request may end now
  }

 private:
  const BlsConfig& config() const { return parent_->model_.config; }
  bool Accumulate() const { return config().accumulate_tokens; }
  bool Declared(const std::string& name) const {
    const auto& outputs = config().outputs;
    return std::find(outputs.begin(), outputs.end(), name) != outputs.end();
  }

  std::vector<RawTensor> TextOnly(const std::string& text) const {
    std::vector<RawTensor> out;
    out.push_back(TextOutput({text}));
    AddBatchIndex(out);
    return out;
  }

  RawTensor TextOutput(const std::vector<std::string>& texts) const {
    std::vector<int64_t> shape = {static_cast<int64_t>(texts.size())};
    if (config().batched) shape.insert(shape.begin(), 1);
    return MakeBytesTensor("text_output", shape, texts);
  }

  void AddBatchIndex(std::vector<RawTensor>& out) const {
    if (!Declared("batch_index")) return;
    std::vector<int64_t> shape = {1};
    if (config().batched) shape.insert(shape.begin(), 1);
    out.push_back(MakeTensor<int32_t>("batch_index", TRITONSERVER_TYPE_INT32, shape,
                                      {static_cast<int32_t>(row_)}));
  }

  Result<std::vector<RawTensor>> Convert(std::vector<RawTensor> outputs, bool final) {
    auto find = [&](const char* name) -> RawTensor* {
      for (RawTensor& t : outputs) {
        if (t.name == name) return &t;
      }
      return nullptr;
    };
    const RawTensor* ids = find("output_ids");
    if (ids == nullptr || ids->datatype != TRITONSERVER_TYPE_INT32 || ids->shape.size() < 2) {
      return Internal("model '" + config().llm_model_name +
                      "' answered without output_ids INT32 [batch, beams, tokens]");
    }
    // [1, beams, len] from a batching tensorrt_llm model, [beams, len] from one that does not.
    const int64_t beams = ids->shape[ids->shape.size() - 2];
    const int64_t len = ids->shape.back();
    const std::vector<int32_t> all = Int32Values(*ids);
    std::vector<int32_t> lengths(beams, static_cast<int32_t>(len));
    if (const RawTensor* seq = find("sequence_length")) {
      std::vector<int32_t> given = Int32Values(*seq);
      for (int64_t b = 0; b < beams && b < static_cast<int64_t>(given.size()); ++b) {
        lengths[b] = std::clamp<int32_t>(given[b], 0, static_cast<int32_t>(len));
      }
    }
    auto beam_ids = [&](int64_t b, int64_t count) {
      std::vector<int32_t> out;
      for (int64_t i = 0; i < count; ++i) {
        const int32_t id = all[b * len + i];
        if (id >= 0) out.push_back(id);  // negative ids pad short beams
      }
      return out;
    };

    std::vector<std::string> texts;
    if (stream_) {
      // A streaming response holds the new tokens only (beam width 1).
      auto piece = text_.Push(beam_ids(0, len));
      if (!piece.ok()) return piece.status();
      std::string text = std::move(*piece);
      if (final) {
        text += text_.Finish();
        flushed_ = true;
      }
      texts.push_back(Accumulate() ? text_.text() : text);
    } else {
      for (int64_t b = 0; b < beams; ++b) {
        auto text = parent_->model_.tokenizer->Decode(beam_ids(b, lengths[b]),
                                                      config().skip_special_tokens);
        if (!text.ok()) return text.status();
        texts.push_back(std::move(*text));
      }
    }

    std::vector<RawTensor> out;
    out.push_back(TextOutput(texts));
    for (const char* name : kPassedOn) {
      RawTensor* t = find(name);
      if (t == nullptr || !Declared(name)) continue;
      if (!config().batched && !t->shape.empty() && t->shape[0] == 1)
        t->shape.erase(t->shape.begin());
      out.push_back(std::move(*t));
    }
    AddBatchIndex(out);
    return out;
  }

  std::shared_ptr<BlsRequest> parent_;  // until the row is done
  const int64_t row_;
  const bool stream_;
  tokenizer::StreamDecoder text_;  // whole characters only: tokenizer/stream_decoder.h
  bool flushed_ = false;
};

BlsRequest::BlsRequest(const BlsModel& model, TRITONBACKEND_ResponseFactory* factory,
                       std::string id)
    : model_(model), factory_(factory), id_(std::move(id)) {}

BlsRequest::~BlsRequest() {
  if (factory_ != nullptr) (void)FromTritonError(TRITONBACKEND_ResponseFactoryDelete(factory_));
}

Status BlsRequest::Start(std::vector<RowRequest> rows) {
  // Tokenize every row first, so that a bad row fails the request before any call starts.
  std::vector<std::vector<RawTensor>> inputs;
  for (const RowRequest& row : rows) {
    ASSIGN_OR_RETURN(auto row_inputs,
                     LlmInputs(*model_.tokenizer, model_.config.add_special_tokens, row));
    inputs.push_back(std::move(row_inputs));
  }
  const std::vector<std::string> requested = LlmOutputNames(model_.config);
  {
    std::lock_guard lock(mu_);
    rows_open_ = static_cast<int>(rows.size());
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    auto row = std::make_shared<Row>(shared_from_this(), rows[i]);
    auto call = std::make_shared<LlmCall>(model_.server, model_.allocator->get(),
                                          model_.config.llm_model_name, row);
    {
      std::lock_guard lock(mu_);
      calls_.push_back(call);
    }
    const std::string id = rows.size() == 1 ? id_ : id_ + "/" + std::to_string(i);
    Status st = call->Start(id, std::move(inputs[i]), requested);
    if (!st.ok()) {
      if (i == 0) {
        std::lock_guard lock(mu_);
        calls_.clear();
        return st;  // nothing started: the caller answers
      }
      Fail(st);  // earlier rows are running: they are cancelled and the request fails
      return Status::Ok();
    }
  }
  return Status::Ok();
}

bool BlsRequest::ClientCancelled() const {
  bool cancelled = false;
  if (factory_ == nullptr) return false;
  Status st = FromTritonError(TRITONBACKEND_ResponseFactoryIsCancelled(factory_, &cancelled));
  return st.ok() && cancelled;
}

void BlsRequest::CancelCalls() {
  std::vector<std::shared_ptr<LlmCall>> calls;
  {
    std::lock_guard lock(mu_);
    calls = calls_;
  }
  for (auto& call : calls) call->Cancel();
}

void BlsRequest::Send(std::vector<RawTensor> outputs) {
  std::vector<std::shared_ptr<LlmCall>> to_cancel;
  {
    std::lock_guard lock(mu_);
    if (failed_ || done_) return;
    if (!model_.config.decoupled) {
      if (!held_) {
        held_ = std::move(outputs);
        return;
      }
      to_cancel = FailLocked(Internal("model '" + model_.config.llm_model_name +
                                      "' sent more than one response to a request of '" +
                                      model_.config.model_name + "', which is not decoupled"));
    } else {
      Status st = SendLocked(outputs, 0);
      if (!st.ok()) {
        LOG_ERROR("model '{}': cannot send a response: {}", model_.config.model_name, st.message());
      }
    }
  }
  for (auto& call : to_cancel) call->Cancel();
}

void BlsRequest::RowDone() {
  std::lock_guard lock(mu_);
  if (--rows_open_ > 0 || failed_ || done_) return;
  FinishLocked();
}

void BlsRequest::Fail(const Status& status) {
  std::vector<std::shared_ptr<LlmCall>> to_cancel;
  {
    std::lock_guard lock(mu_);
    if (failed_ || done_) return;
    to_cancel = FailLocked(status);
  }
  for (auto& call : to_cancel) call->Cancel();
}

std::vector<std::shared_ptr<LlmCall>> BlsRequest::FailLocked(const Status& status) {
  failed_ = true;
  TRITONBACKEND_Response* response = nullptr;
  Status st = FromTritonError(TRITONBACKEND_ResponseNewFromFactory(&response, factory_));
  if (st.ok()) {
    TRITONSERVER_Error* error = ToTritonError(status);
    st = FromTritonError(
        TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error));
    if (error != nullptr) TRITONSERVER_ErrorDelete(error);
  }
  if (!st.ok()) {
    LOG_ERROR("model '{}': cannot send an error: {}", model_.config.model_name, st.message());
  }
  done_ = true;
  std::vector<std::shared_ptr<LlmCall>> calls;
  calls.swap(calls_);  // the calls hold the rows, which hold this request
  return calls;
}

Status BlsRequest::SendLocked(const std::vector<RawTensor>& outputs, uint32_t flags) {
  TRITONBACKEND_Response* response = nullptr;
  RETURN_IF_TRITON_ERROR(TRITONBACKEND_ResponseNewFromFactory(&response, factory_));
  Status st;
  for (const RawTensor& t : outputs) {
    TRITONBACKEND_Output* output = nullptr;
    st = FromTritonError(TRITONBACKEND_ResponseOutput(response, &output, t.name.c_str(), t.datatype,
                                                      t.shape.data(),
                                                      static_cast<uint32_t>(t.shape.size())));
    if (!st.ok()) break;
    void* buffer = nullptr;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    st = FromTritonError(
        TRITONBACKEND_OutputBuffer(output, &buffer, t.data.size(), &memory_type, &memory_id));
    if (!st.ok()) break;
    if (memory_type == TRITONSERVER_MEMORY_GPU) {
      st = Internal("output '" + t.name +
                    "' was given a GPU buffer; the BLS model writes host memory");
      break;
    }
    if (!t.data.empty()) std::memcpy(buffer, t.data.data(), t.data.size());
  }
  TRITONSERVER_Error* error = ToTritonError(st);
  Status sent = FromTritonError(TRITONBACKEND_ResponseSend(
      response, st.ok() ? flags : (flags | TRITONSERVER_RESPONSE_COMPLETE_FINAL), error));
  if (error != nullptr) TRITONSERVER_ErrorDelete(error);
  if (!st.ok()) failed_ = true;
  return st.ok() ? sent : st;
}

void BlsRequest::FinishLocked() {
  if (!model_.config.decoupled && !held_) {
    (void)FailLocked(
        Internal("model '" + model_.config.llm_model_name + "' ended without a response"));
    return;
  }
  Status st;
  if (model_.config.decoupled) {
    st = FromTritonError(
        TRITONBACKEND_ResponseFactorySendFlags(factory_, TRITONSERVER_RESPONSE_COMPLETE_FINAL));
  } else {
    st = SendLocked(*held_, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    held_.reset();
  }
  if (!st.ok()) LOG_ERROR("model '{}': {}", model_.config.model_name, st.message());
  done_ = true;
  calls_.clear();  // the calls hold the rows, which hold this request
}

}  // namespace inflight::bls
