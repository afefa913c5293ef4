#include "server/openai/openai_stream.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "server/http/http_exchange.h"

namespace inflight::server::openai {
namespace {

using nlohmann::ordered_json;

std::string Dump(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string NewId(ApiKind kind) {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = std::random_device{}();
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%016llx%08llx", static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return std::string(kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-") + buffer;
}

std::int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ordered_json Usage(std::int64_t prompt_tokens, std::int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

// Log-probs of one piece. The engine gives each generated token's log-prob; the ensemble gives the
// text of the step, so the first token of a step carries the step's text and any others "".
struct TokenLogprob {
  std::string token;
  float logprob;
};
std::vector<TokenLogprob> PieceTokens(const GenerationPiece& piece) {
  std::vector<TokenLogprob> out;
  for (std::size_t i = 0; i < piece.token_logprobs.size(); ++i) {
    out.push_back({i == 0 ? piece.text : "", piece.token_logprobs[i]});
  }
  return out;
}

ordered_json CompletionLogprobs(const std::vector<TokenLogprob>& tokens, std::int64_t offset) {
  ordered_json out = {{"tokens", ordered_json::array()},
                      {"token_logprobs", ordered_json::array()},
                      {"top_logprobs", ordered_json::array()},
                      {"text_offset", ordered_json::array()}};
  for (const TokenLogprob& t : tokens) {
    out["tokens"].push_back(t.token);
    out["token_logprobs"].push_back(t.logprob);
    // logprobs 0: OpenAI lists only the sampled token.
    out["top_logprobs"].push_back(ordered_json{{t.token, t.logprob}});
    out["text_offset"].push_back(offset);
    offset += static_cast<std::int64_t>(t.token.size());
  }
  return out;
}

ordered_json ChatLogprobs(const std::vector<TokenLogprob>& tokens) {
  ordered_json content = ordered_json::array();
  for (const TokenLogprob& t : tokens) {
    ordered_json bytes = ordered_json::array();
    for (unsigned char c : t.token) bytes.push_back(static_cast<int>(c));
    content.push_back({{"token", t.token},
                       {"logprob", t.logprob},
                       {"bytes", std::move(bytes)},
                       {"top_logprobs", ordered_json::array()}});
  }
  return {{"content", std::move(content)}};
}

class Writer : public ResponseWriter {
 public:
  Writer(ResponseOptions options, std::shared_ptr<http::HttpExchange> exchange)
      : o_(std::move(options)),
        exchange_(std::move(exchange)),
        id_(NewId(o_.kind)),
        created_(UnixNow()) {}

  void Begin() override {
    if (!o_.stream) return;
    http::HttpReply head;
    head.content_type = "text/event-stream; charset=utf-8";
    head.headers.emplace_back("Cache-Control", "no-cache");
    exchange_->StartStream(std::move(head));
    // Chat streams open with the assistant's role, as OpenAI's do.
    if (o_.kind == ApiKind::kChat) {
      SendChunk(ordered_json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
    }
  }

  void OnPiece(GenerationPiece piece) override {
    std::vector<TokenLogprob> tokens =
        o_.logprobs ? PieceTokens(piece) : std::vector<TokenLogprob>{};
    if (!o_.stream) {
      text_ += piece.text;
      tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
      return;
    }
    ordered_json logprobs = nullptr;
    if (o_.logprobs) {
      logprobs = o_.kind == ApiKind::kChat ? ChatLogprobs(tokens)
                                           : CompletionLogprobs(tokens, streamed_bytes_);
    }
    streamed_bytes_ += static_cast<std::int64_t>(piece.text.size());
    if (o_.kind == ApiKind::kChat) {
      SendChunk(ordered_json{{"content", piece.text}}, logprobs, nullptr);
    } else {
      SendChunk(piece.text, logprobs, nullptr);
    }
  }

  void OnFinish(const std::string& finish_reason, std::int64_t completion_tokens) override {
    const ordered_json usage = Usage(o_.prompt_tokens, completion_tokens);
    if (o_.stream) {
      SendChunk(o_.kind == ApiKind::kChat ? ordered_json::object() : ordered_json(""), nullptr,
                finish_reason);
      if (o_.include_usage) {
        ordered_json chunk = Envelope();
        chunk["choices"] = ordered_json::array();
        chunk["usage"] = usage;
        exchange_->Send("data: " + Dump(chunk) + "\n\n");
      }
      exchange_->Send("data: [DONE]\n\n");
      exchange_->End();
      return;
    }
    ordered_json logprobs = nullptr;
    if (o_.logprobs) {
      logprobs = o_.kind == ApiKind::kChat ? ChatLogprobs(tokens_) : CompletionLogprobs(tokens_, 0);
    }
    ordered_json choice = {{"index", 0}};
    if (o_.kind == ApiKind::kChat) {
      choice["message"] = {{"role", "assistant"}, {"content", text_}};
    } else {
      choice["text"] = text_;
    }
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = finish_reason;
    ordered_json body = Envelope();
    body["choices"] = ordered_json::array({std::move(choice)});
    body["usage"] = usage;
    exchange_->Reply(http::JsonReply(200, Dump(body)));
  }

  void OnError(const OpenAiError& error) override {
    if (!o_.stream) {
      exchange_->Reply(OpenAiErrorReply(error));
      return;
    }
    // The 200 is already out: the error is an event, then the stream ends (as OpenAI's does).
    exchange_->Send("data: " + OpenAiErrorJson(error) + "\n\n");
    exchange_->End();
  }

 private:
  ordered_json Envelope() const {
    return {{"id", id_},
            {"object", o_.kind == ApiKind::kChat
                           ? (o_.stream ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion"},
            {"created", created_},
            {"model", o_.model}};
  }

  // One chunk; `content` is the delta (chat) or the text (completions).
  void SendChunk(ordered_json content, ordered_json logprobs, ordered_json finish_reason) {
    ordered_json choice = {{"index", 0}};
    choice[o_.kind == ApiKind::kChat ? "delta" : "text"] = std::move(content);
    choice["logprobs"] = std::move(logprobs);
    choice["finish_reason"] = std::move(finish_reason);
    ordered_json chunk = Envelope();
    chunk["choices"] = ordered_json::array({std::move(choice)});
    // With include_usage, every chunk but the last carries "usage": null (OpenAI's shape).
    if (o_.include_usage) chunk["usage"] = nullptr;
    exchange_->Send("data: " + Dump(chunk) + "\n\n");
  }

  const ResponseOptions o_;
  std::shared_ptr<http::HttpExchange> exchange_;
  const std::string id_;
  const std::int64_t created_;
  std::string text_;                  // not streaming: the whole text
  std::vector<TokenLogprob> tokens_;  // not streaming: every token
  std::int64_t streamed_bytes_ = 0;
};

}  // namespace

std::shared_ptr<ResponseWriter> MakeResponseWriter(ResponseOptions options,
                                                   std::shared_ptr<http::HttpExchange> exchange) {
  return std::make_shared<Writer>(std::move(options), std::move(exchange));
}

}  // namespace inflight::server::openai
