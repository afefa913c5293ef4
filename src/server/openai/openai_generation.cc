#include "server/openai/openai_generation.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "common/logging.h"
#include "server/http/http_exchange.h"

namespace inflight::server::openai {
namespace {

// Triton's BYTES layout: per element a 4-byte little-endian length, then the bytes.
void AppendBytesElement(std::vector<char>& data, const std::string& text) {
  const auto n = static_cast<std::uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) data.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  data.insert(data.end(), text.begin(), text.end());
}

template <typename T>
Tensor Scalar(const std::string& name, TRITONSERVER_DataType type, T value, bool batching) {
  Tensor t{
      name, type, batching ? std::vector<std::int64_t>{1, 1} : std::vector<std::int64_t>{1}, {}};
  t.data.resize(sizeof(T));
  std::memcpy(t.data.data(), &value, sizeof(T));
  return t;
}

Tensor Strings(const std::string& name, const std::vector<std::string>& values, bool batching) {
  const auto n = static_cast<std::int64_t>(values.size());
  Tensor t{name,
           TRITONSERVER_TYPE_BYTES,
           batching ? std::vector<std::int64_t>{1, n} : std::vector<std::int64_t>{n},
           {}};
  for (const std::string& v : values) AppendBytesElement(t.data, v);
  return t;
}

// NVIDIA's preprocessing reads each stop_words element as a CSV line (a comma separates words);
// quoting keeps a stop string with commas or quotes one word.
std::string CsvQuoted(const std::string& word) {
  std::string out = "\"";
  for (char c : word) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

const Tensor* FindOutput(const InferResponse& response, const std::string& name) {
  for (const Tensor& t : response.outputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string FirstBytesElement(const Tensor& t) {
  if (t.data.size() < 4) return "";
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<std::uint32_t>(static_cast<unsigned char>(t.data[i])) << (8 * i);
  n = std::min<std::uint32_t>(n, static_cast<std::uint32_t>(t.data.size() - 4));
  return std::string(t.data.data() + 4, n);
}

// Holds back text that may be the start of a stop string, so that no part of a stop string reaches
// the client; finds the first complete one.
class StopCutter {
 public:
  explicit StopCutter(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // The text that can go out now; *stopped when a stop string ended the text.
  std::string Add(const std::string& text, bool* stopped) {
    held_ += text;
    std::size_t first = std::string::npos;
    for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
    if (first != std::string::npos) {
      *stopped = true;
      std::string out = held_.substr(0, first);
      held_.clear();
      return out;
    }
    std::size_t keep = 0;  // the longest tail of held_ that a stop string starts with
    for (const std::string& stop : stops_) {
      for (std::size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
        if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  std::string Flush() { return std::exchange(held_, ""); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

class CancelHandle {
 public:
  void Set(std::shared_ptr<InflightRequest> handle) {
    std::lock_guard lock(mu_);
    handle_ = std::move(handle);
    if (cancel_wanted_) handle_->Cancel();
  }
  void Cancel() {
    std::lock_guard lock(mu_);
    if (cancel_wanted_) return;
    cancel_wanted_ = true;
    if (handle_) handle_->Cancel();
  }

 private:
  std::mutex mu_;
  std::shared_ptr<InflightRequest> handle_;
  bool cancel_wanted_ = false;
};

// The state of one generation; touched only on the connection's strand.
class Generation {
 public:
  Generation(std::int64_t max_tokens, std::vector<std::string> stop,
             std::shared_ptr<GenerationObserver> observer)
      : max_tokens_(max_tokens), cutter_(std::move(stop)), observer_(std::move(observer)) {}

  CancelHandle& cancel() { return cancel_; }

  void OnResponse(const InferResponse& response) {
    if (done_) return;
    if (response.error) {
      done_ = true;
      observer_->OnError(FromStatus(*response.error));
      return;
    }
    const bool last = response.is_final;
    GenerationPiece piece;
    if (const Tensor* text = FindOutput(response, "text_output")) {
      bool stopped = false;
      piece.text = cutter_.Add(FirstBytesElement(*text), &stopped);
      stopped_ = stopped_ || stopped;
    }
    if (const Tensor* lp = FindOutput(response, "output_log_probs")) {
      piece.token_logprobs.resize(lp->data.size() / sizeof(float));
      std::memcpy(piece.token_logprobs.data(), lp->data.data(),
                  piece.token_logprobs.size() * sizeof(float));
      num_tokens_ += static_cast<std::int64_t>(piece.token_logprobs.size());
    }
    if (stopped_ || last) {
      if (!stopped_) piece.text += cutter_.Flush();
      done_ = true;
    }
    if (!piece.text.empty() || !piece.token_logprobs.empty()) observer_->OnPiece(std::move(piece));
    if (!done_) return;
    if (stopped_ && !last) cancel_.Cancel();  // the rest would be cut anyway
    const bool length = !stopped_ && num_tokens_ >= max_tokens_;
    observer_->OnFinish(length ? "length" : "stop", num_tokens_);
  }

 private:
  const std::int64_t max_tokens_;
  StopCutter cutter_;
  std::shared_ptr<GenerationObserver> observer_;
  CancelHandle cancel_;
  std::int64_t num_tokens_ = 0;
  bool stopped_ = false;
  bool done_ = false;
};

}  // namespace

InferRequest BuildEnsembleRequest(const OpenAiModel& model, const std::string& prompt,
                                  const GenerationSettings& s, std::int64_t max_tokens,
                                  bool stream) {
  const bool b = model.batching;
  InferRequest request;
  request.model_name = model.name;
  request.inputs.push_back(Strings("text_input", {prompt}, b));
  request.inputs.push_back(Scalar<std::int32_t>("max_tokens", TRITONSERVER_TYPE_INT32,
                                                static_cast<std::int32_t>(max_tokens), b));
  if (s.temperature > 0.0) {
    // NOTE: the engine samples only when top_k or top_p is set (TensorRT-LLM's rule; greedy
    // otherwise, whatever the temperature), so top_p goes with every non-zero temperature: OpenAI
    // samples from the whole distribution by default. Temperature 0 leaves both unset: greedy.
    request.inputs.push_back(
        Scalar<float>("temperature", TRITONSERVER_TYPE_FP32, static_cast<float>(s.temperature), b));
    request.inputs.push_back(
        Scalar<float>("top_p", TRITONSERVER_TYPE_FP32, static_cast<float>(s.top_p), b));
  }
  if (s.presence_penalty != 0.0) {
    request.inputs.push_back(Scalar<float>("presence_penalty", TRITONSERVER_TYPE_FP32,
                                           static_cast<float>(s.presence_penalty), b));
  }
  if (s.frequency_penalty != 0.0) {
    request.inputs.push_back(Scalar<float>("frequency_penalty", TRITONSERVER_TYPE_FP32,
                                           static_cast<float>(s.frequency_penalty), b));
  }
  if (s.seed) {
    request.inputs.push_back(Scalar<std::uint64_t>("seed", TRITONSERVER_TYPE_UINT64, *s.seed, b));
  }
  if (!s.stop.empty()) {
    std::vector<std::string> words;
    for (const std::string& w : s.stop) words.push_back(CsvQuoted(w));
    request.inputs.push_back(Strings("stop_words", words, b));
  }
  // Always: the log-probs tensor has one entry per generated token, which is how usage counts
  // them exactly.
  request.inputs.push_back(Scalar<bool>("return_log_probs", TRITONSERVER_TYPE_BOOL, true, b));
  request.inputs.push_back(
      Scalar<bool>("exclude_input_in_output", TRITONSERVER_TYPE_BOOL, true, b));
  request.inputs.push_back(Scalar<bool>("stream", TRITONSERVER_TYPE_BOOL, stream, b));
  request.requested_outputs = {"text_output", "output_log_probs"};
  return request;
}

std::optional<OpenAiError> RunGeneration(Server& server, InferRequest request,
                                         std::int64_t max_tokens, std::vector<std::string> stop,
                                         const std::shared_ptr<http::HttpExchange>& exchange,
                                         std::shared_ptr<GenerationObserver> observer) {
  auto generation = std::make_shared<Generation>(max_tokens, std::move(stop), std::move(observer));
  auto started = server.Infer(std::move(request), [exchange, generation](InferResponse response) {
    // From a core thread to the connection's strand, where the observer writes to the client.
    exchange->Dispatch([generation, response = std::make_shared<InferResponse>(std::move(
                                        response))] { generation->OnResponse(*response); });
  });
  if (!started.ok()) return FromStatus(started.status());
  generation->cancel().Set(std::move(*started));
  exchange->OnClientGone([generation] {
    LOG_DEBUG("OpenAI client left before its answer; cancelling the request");
    generation->cancel().Cancel();
  });
  return std::nullopt;
}

std::int64_t DefaultMaxTokens(const OpenAiModel& model, bool chat, std::int64_t prompt_tokens) {
  constexpr std::int64_t kOpenAiCompletionDefault = 16;
  if (!chat || !model.max_seq_len) return kOpenAiCompletionDefault;
  return std::max<std::int64_t>(1, *model.max_seq_len - prompt_tokens);
}

}  // namespace inflight::server::openai
