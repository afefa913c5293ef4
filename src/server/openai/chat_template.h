// Chat templates as Hugging Face's tokenizer.apply_chat_template renders them: real Jinja2
// (Debian's python3-jinja2) in an embedded CPython, with the environment transformers sets up.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace inflight::server::openai {

// What a tokenizer folder says about chat: its template(s) and the special tokens that templates
// read (bos_token, eos_token, ...).
struct ChatTemplateSet {
  // Name → template. A single template is named "default"; tokenizer_config.json may also hold a
  // list of {"name", "template"} (transformers' named templates, e.g. "tool_use").
  std::map<std::string, std::string> templates;
  // special token name → its text, for the tokens the folder sets (transformers passes
  // tokenizer.special_tokens_map to the template, so an unset token stays undefined there).
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
};

// Reads <dir>/chat_template.jinja if present (transformers >= 4.43 writes the template there), else
// tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"}); special
// tokens come from tokenizer_config.json, each a string or an AddedToken object {"content": ...}.
// A folder without a template gives an empty `templates`; an unreadable file is an error.
Result<ChatTemplateSet> LoadChatTemplates(const std::string& dir);

// The template a request uses: the one named "default". Empty when the folder has none, or only
// named ones without a default (transformers' apply_chat_template refuses that case too).
std::optional<std::string> DefaultChatTemplate(const ChatTemplateSet& set);

// Renders `chat_template` with transformers' environment (chat_template_utils.py,
// _compile_jinja_template): ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
// with the loopcontrols extension and the {% generation %} tag, tojson as json.dumps (no HTML
// escaping), raise_exception and strftime_now. The context is `messages`, `add_generation_prompt`,
// `tools` and `documents` (None, as apply_chat_template passes them), and every special token.
//
// A template that raises (raise_exception) or fails on the conversation is kInvalidArgument with
// the template's message; no usable Python/Jinja2 is kUnavailable. Thread-safe: one interpreter,
// started on first use; each render holds the GIL, so renders run one at a time. `messages` is
// ordered_json so that objects keep the client's key order (templates may iterate them).
Result<std::string> RenderChatTemplate(const std::string& chat_template,
                                       const nlohmann::ordered_json& messages,
                                       bool add_generation_prompt,
                                       const nlohmann::ordered_json& special_tokens);

}  // namespace inflight::server::openai
