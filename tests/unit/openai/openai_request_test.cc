// Reading /v1/completions and /v1/chat/completions bodies: what is honoured, what is refused and
// which field an error names.
#include <gtest/gtest.h>

#include "server/openai/openai_request.h"

namespace inflight::server::openai {
namespace {

using nlohmann::ordered_json;

TEST(OpenAiRequestTest, CompletionDefaultsAndFields) {
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(ordered_json{{"model", "m"}, {"prompt", "hi"}}, &r));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_FALSE(r.settings.max_tokens.has_value());
  EXPECT_EQ(r.settings.temperature, 1.0);  // OpenAI's defaults: sampling
  EXPECT_EQ(r.settings.top_p, 1.0);
  EXPECT_FALSE(r.settings.stream);
  EXPECT_FALSE(r.settings.logprobs);

  CompletionRequest full;
  ASSERT_FALSE(ParseCompletionRequest(
      ordered_json::parse(R"({"model": "m", "prompt": ["one"], "max_tokens": 7,
        "temperature": 0, "top_p": 0.5, "stop": "\n", "seed": 18446744073709551615,
        "stream": true, "stream_options": {"include_usage": true}, "logprobs": 0,
        "presence_penalty": -1.5, "n": 1, "user": "u"})"),
      &full));
  EXPECT_EQ(full.prompt, "one");
  EXPECT_EQ(full.settings.max_tokens, 7);
  EXPECT_EQ(full.settings.temperature, 0.0);
  EXPECT_EQ(full.settings.top_p, 0.5);
  EXPECT_EQ(full.settings.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(full.settings.seed, 18446744073709551615ull);
  EXPECT_TRUE(full.settings.stream);
  EXPECT_TRUE(full.settings.include_usage);
  EXPECT_TRUE(full.settings.logprobs);
  EXPECT_EQ(full.settings.presence_penalty, -1.5);
}

std::string RefusedParam(const char* body, bool chat) {
  const ordered_json json = ordered_json::parse(body);
  std::optional<OpenAiError> error;
  if (chat) {
    ChatRequest r;
    error = ParseChatRequest(json, &r);
  } else {
    CompletionRequest r;
    error = ParseCompletionRequest(json, &r);
  }
  if (!error) return "<accepted>";
  EXPECT_EQ(error->http_status, 400);
  EXPECT_NE(error->message.find(error->param.empty() ? "" : error->param), std::string::npos)
      << "the message names the field: " << error->message;
  return error->param;
}

TEST(OpenAiRequestTest, RefusalsNameTheField) {
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": "x", "n": 2})", false), "n");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": ["a", "b"]})", false), "prompt");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": [[1, 2]]})", false), "prompt");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": "x", "logprobs": 1})", false), "logprobs");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": "x", "stop": ""})", false), "stop");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": "x", "stop": [1]})", false), "stop");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": "x", "top_p": 0})", false), "top_p");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": "x", "max_tokens": 1.5})", false),
            "max_tokens");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": "x", "stream_options": {"x": 1}})", false),
            "stream_options.x");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "prompt": "x", "repetition_penalty": 1.1})", false),
            "repetition_penalty");
  EXPECT_EQ(RefusedParam(R"({"prompt": "x"})", false), "model");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                             "logprobs": true, "top_logprobs": 1})",
                         true),
            "top_logprobs");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                             "reasoning_effort": "high"})",
                         true),
            "reasoning_effort");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "messages": [{"role": "user"}]})", true),
            "messages[0].content");
  EXPECT_EQ(RefusedParam(R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", true),
            "messages[0].content");
  // Harmless fields and empty tool lists pass.
  EXPECT_EQ(RefusedParam(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                             "tools": [], "tool_choice": "none", "user": "u", "store": false,
                             "response_format": {"type": "text"}})",
                         true),
            "<accepted>");
}

TEST(OpenAiRequestTest, ChatMessagesAsTemplatesTakeThem) {
  ChatRequest r;
  ASSERT_FALSE(ParseChatRequest(
      ordered_json::parse(R"({"model": "m", "max_completion_tokens": 3, "logprobs": true,
        "messages": [{"role": "developer", "content": "be brief", "name": "d"},
                     {"role": "user", "content": [{"type": "text", "text": "a"},
                                                  {"type": "text", "text": "b"}]},
                     {"role": "assistant", "tool_calls": []}]})"),
      &r));
  EXPECT_EQ(r.settings.max_tokens, 3);
  EXPECT_TRUE(r.settings.logprobs);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].dump(), R"({"role":"system","content":"be brief","name":"d"})");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
}

}  // namespace
}  // namespace inflight::server::openai
