// OpenAI's error shape: {"error": {"message", "type", "param", "code"}} with 400/404/500/503.
#pragma once

#include <string>

#include "common/status.h"
#include "server/http/http_message.h"

namespace inflight::server::openai {

struct OpenAiError {
  int http_status = 400;
  std::string message;
  std::string param;  // the request field at fault; empty → null
  std::string type = "invalid_request_error";
};

OpenAiError InvalidField(const std::string& param, const std::string& message);
// A Status from the core or the tokenizer: its HTTP status (kNotFound 404, kUnavailable 503, ...);
// `param` names the request field it concerns, if any.
OpenAiError FromStatus(const Status& status, const std::string& param = "");

std::string OpenAiErrorJson(const OpenAiError& error);
http::HttpReply OpenAiErrorReply(const OpenAiError& error);

}  // namespace inflight::server::openai
