#include "server/openai/openai_request.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

namespace inflight::server::openai {
namespace {

using nlohmann::ordered_json;
using Error = std::optional<OpenAiError>;

std::string Shown(const ordered_json& value) {
  std::string text = value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

std::string Number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", x);
  return buffer;
}

Error Refuse(const std::string& field, const ordered_json& value, const std::string& accepted) {
  return InvalidField(field, field + " " + Shown(value) + " is not supported: " + accepted);
}

// A number in [lo, hi]; null leaves `out` as it is.
Error ReadNumber(const ordered_json& body, const std::string& field, double lo, double hi,
                 double* out) {
  if (!body.contains(field) || body[field].is_null()) return std::nullopt;
  const ordered_json& value = body[field];
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < lo ||
      value.get<double>() > hi) {
    return InvalidField(field, field + " " + Shown(value) +
                                   " is not accepted: must be a number in [" + Number(lo) + ", " +
                                   Number(hi) + "]");
  }
  *out = value.get<double>();
  return std::nullopt;
}

Error ReadPositiveInt(const ordered_json& body, const std::string& field,
                      std::optional<std::int64_t>* out) {
  if (!body.contains(field) || body[field].is_null()) return std::nullopt;
  const ordered_json& value = body[field];
  if (!value.is_number_integer() || value.get<std::int64_t>() < 1 ||
      value.get<std::int64_t>() > INT32_MAX) {
    return InvalidField(field,
                        field + " " + Shown(value) + " is not accepted: must be an integer >= 1");
  }
  *out = value.get<std::int64_t>();
  return std::nullopt;
}

Error ReadBool(const ordered_json& body, const std::string& field, bool* out) {
  if (!body.contains(field) || body[field].is_null()) return std::nullopt;
  if (!body[field].is_boolean()) {
    return InvalidField(field, field + " " + Shown(body[field]) + " is not a boolean");
  }
  *out = body[field].get<bool>();
  return std::nullopt;
}

// Fields that change the output, read the same way by both endpoints.
Error ReadCommon(const ordered_json& body, GenerationSettings* s) {
  if (Error e = ReadPositiveInt(body, "max_tokens", &s->max_tokens)) return e;
  if (Error e = ReadNumber(body, "temperature", 0.0, 2.0, &s->temperature)) return e;
  if (Error e = ReadNumber(body, "top_p", 0.0, 1.0, &s->top_p)) return e;
  if (body.contains("top_p") && body["top_p"].is_number() && s->top_p <= 0.0) {
    return InvalidField("top_p", "top_p 0 is not accepted: must be in (0, 1]");
  }
  if (Error e = ReadNumber(body, "presence_penalty", -2.0, 2.0, &s->presence_penalty)) return e;
  if (Error e = ReadNumber(body, "frequency_penalty", -2.0, 2.0, &s->frequency_penalty)) return e;
  if (body.contains("seed") && !body["seed"].is_null()) {
    const ordered_json& seed = body["seed"];
    if (!seed.is_number_integer() ||
        (seed.is_number_integer() && !seed.is_number_unsigned() && seed.get<std::int64_t>() < 0)) {
      return InvalidField("seed",
                          "seed " + Shown(seed) + " is not accepted: must be an integer >= 0");
    }
    s->seed = seed.get<std::uint64_t>();
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const ordered_json& stop = body["stop"];
    const OpenAiError bad = InvalidField(
        "stop", "stop " + Shown(stop) +
                    " is not accepted: must be a non-empty string or a list of up to 4 of them");
    std::vector<std::string> words;
    if (stop.is_string()) {
      words.push_back(stop.get<std::string>());
    } else if (stop.is_array() && stop.size() <= 4) {
      for (const ordered_json& word : stop) {
        if (!word.is_string()) return bad;
        words.push_back(word.get<std::string>());
      }
    } else {
      return bad;
    }
    for (const std::string& word : words) {
      if (word.empty()) return bad;
    }
    s->stop = std::move(words);
  }
  if (body.contains("n") && !body["n"].is_null() && body["n"] != 1) {
    return Refuse("n", body["n"], "only n = 1 (one choice per request) is served");
  }
  if (Error e = ReadBool(body, "stream", &s->stream)) return e;
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const ordered_json& options = body["stream_options"];
    if (!options.is_object()) {
      return InvalidField("stream_options", "stream_options must be an object");
    }
    for (const auto& [key, value] : options.items()) {
      if (key != "include_usage") {
        return Refuse("stream_options." + key, value, "only include_usage is known");
      }
    }
    if (Error e = ReadBool(options, "include_usage", &s->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  if (body.contains("logit_bias") && !body["logit_bias"].is_null() &&
      !(body["logit_bias"].is_object() && body["logit_bias"].empty())) {
    return Refuse("logit_bias", body["logit_bias"],
                  "per-token biases are not available through the ensemble");
  }
  return std::nullopt;
}

// Fields that cannot change the output: accepted and not used. (parallel_tool_calls only matters
// with tools, which are refused; prompt_cache_key and safety_identifier are OpenAI's bookkeeping.)
const std::set<std::string> kHarmless = {"user",
                                         "metadata",
                                         "store",
                                         "service_tier",
                                         "parallel_tool_calls",
                                         "prompt_cache_key",
                                         "safety_identifier"};

Error CheckKnown(const ordered_json& body, const std::set<std::string>& known) {
  for (const auto& [key, value] : body.items()) {
    if (known.count(key) == 0 && kHarmless.count(key) == 0) {
      return InvalidField(key, "unknown field \"" + key + "\": this server does not support it");
    }
  }
  return std::nullopt;
}

Error ReadModel(const ordered_json& body, std::string* model) {
  if (!body.contains("model") || !body["model"].is_string() || body["model"].empty()) {
    return InvalidField("model", "model is required: the name of a model from GET /v1/models");
  }
  *model = body["model"].get<std::string>();
  return std::nullopt;
}

// Content as templates take it: a string. Text parts are joined with "\n" (as vLLM's "string"
// content format does); other part types are refused.
Error ReadContent(const ordered_json& content, const std::string& where, ordered_json* out) {
  if (content.is_string() || content.is_null()) {
    *out = content;
    return std::nullopt;
  }
  if (!content.is_array()) {
    return InvalidField(where, where + " must be a string or a list of content parts");
  }
  std::string text;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const ordered_json& part = content[j];
    const std::string part_where = where + "[" + std::to_string(j) + "]";
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return InvalidField(part_where + ".type",
                          part_where + " " + Shown(part) +
                              " is not supported: only {\"type\": \"text\", \"text\": ...} parts");
    }
    if (j > 0) text += "\n";
    text += part["text"].get<std::string>();
  }
  *out = text;
  return std::nullopt;
}

}  // namespace

std::optional<OpenAiError> ParseCompletionRequest(const ordered_json& body,
                                                  CompletionRequest* out) {
  if (!body.is_object()) return InvalidField("", "the request body must be a JSON object");
  if (Error e =
          CheckKnown(body, {"model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias",
                            "logprobs", "max_tokens", "n", "presence_penalty", "seed", "stop",
                            "stream", "stream_options", "suffix", "temperature", "top_p"})) {
    return e;
  }
  if (Error e = ReadModel(body, &out->model)) return e;
  const ordered_json prompt = body.value("prompt", ordered_json());
  if (prompt.is_string()) {
    out->prompt = prompt.get<std::string>();
  } else if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
    out->prompt = prompt[0].get<std::string>();
  } else {
    return InvalidField("prompt",
                        "prompt " + Shown(prompt) +
                            " is not supported: give one prompt, a string (or a list "
                            "of one string); token-id prompts and batches are not served");
  }
  out->settings.max_tokens.reset();
  if (Error e = ReadCommon(body, &out->settings)) return e;
  if (body.contains("best_of") && !body["best_of"].is_null() && body["best_of"] != 1) {
    return Refuse("best_of", body["best_of"], "only best_of = 1 is served");
  }
  if (body.contains("echo") && !body["echo"].is_null() && body["echo"] != false) {
    return Refuse("echo", body["echo"], "the prompt is not echoed; echo must be false");
  }
  if (body.contains("suffix") && !body["suffix"].is_null() && body["suffix"] != "") {
    return Refuse("suffix", body["suffix"], "insertion (suffix) is not served");
  }
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    const ordered_json& logprobs = body["logprobs"];
    if (!logprobs.is_number_integer() || logprobs.get<std::int64_t>() < 0 ||
        logprobs.get<std::int64_t>() > 5) {
      return InvalidField("logprobs", "logprobs " + Shown(logprobs) +
                                          " is not accepted: must be an integer in [0, 5]");
    }
    if (logprobs.get<std::int64_t>() > 0) {
      return Refuse("logprobs", logprobs,
                    "the engine gives the chosen token's log-prob only; use logprobs 0");
    }
    out->settings.logprobs = true;
  }
  return std::nullopt;
}

std::optional<OpenAiError> ParseChatRequest(const ordered_json& body, ChatRequest* out) {
  if (!body.is_object()) return InvalidField("", "the request body must be a JSON object");
  if (Error e = CheckKnown(body, {"model",
                                  "messages",
                                  "frequency_penalty",
                                  "logit_bias",
                                  "logprobs",
                                  "top_logprobs",
                                  "max_tokens",
                                  "max_completion_tokens",
                                  "n",
                                  "presence_penalty",
                                  "response_format",
                                  "seed",
                                  "stop",
                                  "stream",
                                  "stream_options",
                                  "temperature",
                                  "top_p",
                                  "tools",
                                  "tool_choice",
                                  "functions",
                                  "function_call",
                                  "modalities",
                                  "audio",
                                  "prediction",
                                  "reasoning_effort",
                                  "web_search_options"})) {
    return e;
  }
  if (Error e = ReadModel(body, &out->model)) return e;
  if (Error e = ReadCommon(body, &out->settings)) return e;
  if (body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null()) {
    // The newer name of max_tokens; when both are given they must agree.
    std::optional<std::int64_t> limit;
    if (Error e = ReadPositiveInt(body, "max_completion_tokens", &limit)) return e;
    if (out->settings.max_tokens && *out->settings.max_tokens != *limit) {
      return InvalidField("max_completion_tokens", "max_completion_tokens " +
                                                       std::to_string(*limit) + " and max_tokens " +
                                                       std::to_string(*out->settings.max_tokens) +
                                                       " disagree; give one of them");
    }
    out->settings.max_tokens = limit;
  }
  if (Error e = ReadBool(body, "logprobs", &out->settings.logprobs)) return e;
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
    const ordered_json& top = body["top_logprobs"];
    if (!top.is_number_integer() || top.get<std::int64_t>() < 0 || top.get<std::int64_t>() > 20) {
      return InvalidField("top_logprobs", "top_logprobs " + Shown(top) +
                                              " is not accepted: must be an integer in [0, 20]");
    }
    if (!out->settings.logprobs) {
      return InvalidField("top_logprobs", "top_logprobs needs logprobs: true");
    }
    if (top.get<std::int64_t>() > 0) {
      return Refuse("top_logprobs", top,
                    "the engine gives the chosen token's log-prob only; use top_logprobs 0");
    }
  }
  auto set_and_not = [&](const char* field, auto accepted) -> Error {
    if (body.contains(field) && !body[field].is_null() && !accepted(body[field])) {
      return Refuse(field, body[field], std::string("this server does not do ") + field);
    }
    return std::nullopt;
  };
  if (Error e =
          set_and_not("tools", [](const ordered_json& v) { return v.is_array() && v.empty(); }))
    return e;
  if (Error e = set_and_not("tool_choice", [](const ordered_json& v) { return v == "none"; }))
    return e;
  if (Error e =
          set_and_not("functions", [](const ordered_json& v) { return v.is_array() && v.empty(); }))
    return e;
  if (Error e = set_and_not("function_call", [](const ordered_json& v) { return v == "none"; }))
    return e;
  if (Error e = set_and_not("response_format", [](const ordered_json& v) {
        return v.is_object() && v.value("type", "") == "text";
      }))
    return e;
  if (Error e = set_and_not(
          "modalities", [](const ordered_json& v) { return v == ordered_json::array({"text"}); }))
    return e;
  for (const char* field : {"audio", "prediction", "reasoning_effort", "web_search_options"}) {
    if (Error e = set_and_not(field, [](const ordered_json&) { return false; })) return e;
  }

  const ordered_json messages = body.value("messages", ordered_json());
  if (!messages.is_array() || messages.empty()) {
    return InvalidField("messages", "messages must be a non-empty list of {\"role\", \"content\"}");
  }
  out->messages = ordered_json::array();
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const ordered_json& message = messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
        kRoles.count(message["role"].get<std::string>()) == 0) {
      return InvalidField(where + ".role",
                          where + " needs a role: system, developer, user, assistant or tool");
    }
    ordered_json copy = message;
    if (copy["role"] == "developer") copy["role"] = "system";
    if (!message.contains("content") && message["role"] != "assistant") {
      return InvalidField(where + ".content", where + ".content is required");
    }
    if (message.contains("content")) {
      ordered_json content;
      if (Error e = ReadContent(message["content"], where + ".content", &content)) return e;
      copy["content"] = std::move(content);
    } else {
      copy["content"] = nullptr;
    }
    out->messages.push_back(std::move(copy));
  }
  return std::nullopt;
}

}  // namespace inflight::server::openai
