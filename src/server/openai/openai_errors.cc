#include "server/openai/openai_errors.h"

#include <nlohmann/json.hpp>

#include "server/http/http_service.h"

namespace inflight::server::openai {

OpenAiError InvalidField(const std::string& param, const std::string& message) {
  return OpenAiError{400, message, param};
}

OpenAiError FromStatus(const Status& status, const std::string& param) {
  OpenAiError error;
  error.http_status = http::HttpStatusFor(status.code());
  error.message = status.message();
  error.param = param;
  // OpenAI's types: invalid_request_error for the client's mistakes, server_error otherwise.
  if (error.http_status >= 500) error.type = "server_error";
  return error;
}

std::string OpenAiErrorJson(const OpenAiError& error) {
  nlohmann::json body = {
      {"error",
       {{"message", error.message},
        {"type", error.type},
        {"param", error.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param)},
        {"code", nullptr}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

http::HttpReply OpenAiErrorReply(const OpenAiError& error) {
  return http::JsonReply(error.http_status, OpenAiErrorJson(error));
}

}  // namespace inflight::server::openai
