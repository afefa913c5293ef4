#include "tokenizer/tokenizer_config.h"

#include "tokenizer/json_file.h"

namespace inflight::tokenizer {
namespace {

using nlohmann::json;

Result<std::optional<std::string>> TokenName(const std::string& path, const json& root,
                                             const char* key) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return std::optional<std::string>((*it)["content"].get<std::string>());
  }
  return InvalidArgument(path + ": " + key + " is " + it->dump() +
                         "; expected a string, {\"content\": string} or null");
}

Result<std::optional<bool>> Flag(const std::string& path, const json& root, const char* key) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) {
    return InvalidArgument(path + ": " + key + " is " + it->dump() + "; expected true or false");
  }
  return std::optional<bool>(it->get<bool>());
}

}  // namespace

Result<TokenizerConfig> ReadTokenizerConfig(const std::string& path) {
  ASSIGN_OR_RETURN(json root, ReadJsonFile(path));
  if (!root.is_object()) return InvalidArgument(path + ": the top level is not a JSON object");
  TokenizerConfig config;
  ASSIGN_OR_RETURN(config.bos_token, TokenName(path, root, "bos_token"));
  ASSIGN_OR_RETURN(config.eos_token, TokenName(path, root, "eos_token"));
  ASSIGN_OR_RETURN(config.pad_token, TokenName(path, root, "pad_token"));
  ASSIGN_OR_RETURN(config.unk_token, TokenName(path, root, "unk_token"));
  ASSIGN_OR_RETURN(config.add_bos_token, Flag(path, root, "add_bos_token"));
  ASSIGN_OR_RETURN(config.add_eos_token, Flag(path, root, "add_eos_token"));
  ASSIGN_OR_RETURN(config.add_prefix_space, Flag(path, root, "add_prefix_space"));
  ASSIGN_OR_RETURN(config.clean_up_tokenization_spaces,
                   Flag(path, root, "clean_up_tokenization_spaces"));

  if (auto it = root.find("additional_special_tokens"); it != root.end() && !it->is_null()) {
    if (!it->is_array()) {
      return InvalidArgument(path + ": additional_special_tokens is " + it->dump() +
                             "; expected an array");
    }
    for (const json& t : *it) {
      if (t.is_string()) {
        config.additional_special_tokens.push_back(t.get<std::string>());
      } else if (t.is_object() && t.contains("content") && t["content"].is_string()) {
        config.additional_special_tokens.push_back(t["content"].get<std::string>());
      } else {
        return InvalidArgument(path + ": additional_special_tokens holds " + t.dump() +
                               "; expected strings or {\"content\": string}");
      }
    }
  }

  if (auto it = root.find("added_tokens_decoder"); it != root.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      AddedToken token;
      try {
        size_t used = 0;
        token.id = std::stoi(key, &used);
        if (used != key.size() || token.id < 0 || token.id > kMaxTokenId)
          throw std::invalid_argument(key);
      } catch (const std::exception&) {
        return InvalidArgument(path + ": added_tokens_decoder key \"" + key + "\" is not " +
                               kTokenIdRange);
      }
      if (!value.is_object() || !value.contains("content") || !value["content"].is_string()) {
        return InvalidArgument(path + ": added_tokens_decoder[\"" + key + "\"] has no content");
      }
      token.content = value["content"].get<std::string>();
      token.special = value.value("special", false);
      token.lstrip = value.value("lstrip", false);
      token.rstrip = value.value("rstrip", false);
      config.added_tokens.push_back(std::move(token));
    }
  }
  return config;
}

}  // namespace inflight::tokenizer
