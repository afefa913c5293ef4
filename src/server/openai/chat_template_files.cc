// Finding a tokenizer folder's chat template(s) and special tokens.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/openai/chat_template.h"

namespace inflight::server::openai {
namespace {

using nlohmann::json;

Result<std::optional<std::string>> ReadIfPresent(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot open " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return std::optional<std::string>(text.str());
}

// transformers' special_tokens_map keys; additional_special_tokens is a list.
constexpr const char* kSpecialTokenKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                             "pad_token", "cls_token", "mask_token"};

// A token as tokenizer_config.json writes it: a string, or an AddedToken {"content": ...}.
std::optional<std::string> TokenText(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

Result<ChatTemplateSet> LoadChatTemplates(const std::string& dir) {
  ChatTemplateSet set;
  const std::filesystem::path folder(dir);
  ASSIGN_OR_RETURN(auto config_text, ReadIfPresent(folder / "tokenizer_config.json"));
  json config = json::object();
  if (config_text) {
    config = json::parse(*config_text, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) {
      return InvalidArgument((folder / "tokenizer_config.json").string() + " is not a JSON object");
    }
  }
  for (const char* key : kSpecialTokenKeys) {
    if (!config.contains(key)) continue;
    if (auto text = TokenText(config[key])) set.special_tokens[key] = *text;
  }
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const json& token : config["additional_special_tokens"]) {
      if (auto text = TokenText(token)) list.push_back(*text);
    }
    set.special_tokens["additional_special_tokens"] = std::move(list);
  }

  ASSIGN_OR_RETURN(auto jinja_file, ReadIfPresent(folder / "chat_template.jinja"));
  if (jinja_file) {
    set.templates["default"] = *jinja_file;
    return set;
  }
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return set;
  const json& chat_template = config["chat_template"];
  if (chat_template.is_string()) {
    set.templates["default"] = chat_template.get<std::string>();
  } else if (chat_template.is_array()) {
    for (const json& entry : chat_template) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string()) {
        return InvalidArgument((folder / "tokenizer_config.json").string() +
                               ": chat_template list entries must be {\"name\": string, "
                               "\"template\": string}");
      }
      set.templates[entry["name"].get<std::string>()] = entry["template"].get<std::string>();
    }
  } else {
    return InvalidArgument((folder / "tokenizer_config.json").string() +
                           ": chat_template must be a string or a list of named templates, got " +
                           std::string(chat_template.type_name()));
  }
  return set;
}

std::optional<std::string> DefaultChatTemplate(const ChatTemplateSet& set) {
  auto it = set.templates.find("default");
  if (it != set.templates.end()) return it->second;
  return std::nullopt;
}

}  // namespace inflight::server::openai
