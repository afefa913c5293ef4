// POST /v1/chat/completions: the messages become the prompt through the tokenizer folder's chat
// template (chat_template.h), with the generation prompt added, as apply_chat_template(messages,
// add_generation_prompt=True) would make it.
#include <nlohmann/json.hpp>

#include "server/http/http_exchange.h"
#include "server/openai/chat_template.h"
#include "server/openai/openai_routes.h"

namespace inflight::server::openai {
namespace {

// transformers tokenizes a rendered chat with add_special_tokens=False, since templates write the
// BOS themselves; the preprocessing model encodes with its add_special_tokens parameter (true by
// default: BOS for Llama-3). When it would add a BOS and the template wrote one, the template's
// goes, so the model sees the ids transformers would give it, not two BOS.
std::string WithoutDoubleBos(const OpenAiModel& model, std::string prompt) {
  const auto& tokens = model.chat->special_tokens;
  if (!model.add_special_tokens || !tokens.contains("bos_token")) return prompt;
  const std::string bos = tokens["bos_token"].get<std::string>();
  auto added = model.tokenizer->Encode("", /*add_special_tokens=*/true);
  const bool adds_bos = added.ok() && !added->empty() && model.tokenizer->bos_id() &&
                        added->front() == *model.tokenizer->bos_id();
  if (adds_bos && !bos.empty() && prompt.rfind(bos, 0) == 0) prompt.erase(0, bos.size());
  return prompt;
}

}  // namespace

void OpenAiRoutes::HandleChatCompletions(const http::HttpRequest& req,
                                         const std::shared_ptr<http::HttpExchange>& exchange) {
  const auto body = nlohmann::ordered_json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return exchange->Reply(
        OpenAiErrorReply(InvalidField("", "the request body is not valid JSON")));
  }
  ChatRequest request;
  if (auto error = ParseChatRequest(body, &request)) {
    return exchange->Reply(OpenAiErrorReply(*error));
  }
  auto model = models_.Resolve(request.model);
  if (!model.ok()) return exchange->Reply(OpenAiErrorReply(FromStatus(model.status(), "model")));
  auto chat_template = DefaultChatTemplate(*(*model)->chat);
  if (!chat_template) {
    return exchange->Reply(OpenAiErrorReply(InvalidField(
        "messages",
        "model \"" + request.model + "\" has no chat template: its tokenizer folder (" +
            (*model)->tokenizer_dir +
            ") has no default chat_template in tokenizer_config.json or chat_template.jinja; "
            "use /v1/completions with a prompt")));
  }
  // NOTE: rendering runs here, on the io thread, holding the embedded interpreter's GIL: chat
  // templates render in well under a millisecond, and one interpreter serialises them anyway.
  auto prompt = RenderChatTemplate(*chat_template, request.messages,
                                   /*add_generation_prompt=*/true, (*model)->chat->special_tokens);
  if (!prompt.ok())
    return exchange->Reply(OpenAiErrorReply(FromStatus(prompt.status(), "messages")));
  Serve(**model, WithoutDoubleBos(**model, *prompt), request.settings, ApiKind::kChat, exchange);
}

}  // namespace inflight::server::openai
