// Hugging Face tokenizer.json: the parts a byte-level BPE tokenizer uses. Field names and meanings
// follow the tokenizers library's serialization (model, pre_tokenizer, post_processor, decoder,
// added_tokens).
#include "common/logging.h"
#include "tokenizer/json_file.h"
#include "tokenizer/tokenizer_parts.h"

namespace inflight::tokenizer {
namespace {

using nlohmann::json;

// The member or JSON null, without copying (root.value() would copy the 10 MB model).
const json& Member(const json& obj, const char* key) {
  static const json kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// Error helper: every message starts with the file and the JSON path of the field.
class JsonReader {
 public:
  explicit JsonReader(std::string path) : path_(std::move(path)) {}

  Status Error(const std::string& field, const std::string& problem) const {
    return InvalidArgument(path_ + ": " + field + " " + problem);
  }
  Status Unsupported(const std::string& field, const std::string& problem) const {
    return ::inflight::Unsupported(path_ + ": " + field + " " + problem);
  }
  Result<bool> Bool(const json& obj, const char* key, bool fallback,
                    const std::string& field) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean())
      return Error(field + "." + key, "is " + it->dump() + "; expected true or false");
    return it->get<bool>();
  }
  Result<std::string> String(const json& obj, const char* key, const std::string& field) const {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) {
      return Error(field + "." + key,
                   it == obj.end() ? "is missing" : "is " + it->dump() + "; expected a string");
    }
    return it->get<std::string>();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Result<std::vector<std::pair<std::string, std::string>>> ReadMerges(const JsonReader& r,
                                                                    const json& merges) {
  if (!merges.is_array()) return r.Error("model.merges", "is not an array");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    // Older files write "a b"; newer ones (tokenizers >= 0.20) write ["a", "b"].
    if (m.is_string()) {
      const auto& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return r.Error(field, "is \"" + s + "\"; expected two tokens separated by one space");
      }
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return r.Error(field, "is " + m.dump() + "; expected \"a b\" or [\"a\", \"b\"]");
    }
  }
  return out;
}

Result<std::unique_ptr<BpeModel>> ReadModel(const JsonReader& r, const json& model) {
  if (!model.is_object()) return r.Error("model", "is missing or not an object");
  if (auto type = model.find("type"); type != model.end() && *type != "BPE") {
    return r.Unsupported("model.type", "is " + type->dump() + "; only BPE is supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
      return r.Unsupported(std::string("model.") + key,
                           "is " + it->dump() + "; only byte-level BPE without it is supported");
    }
  }
  auto vocab_json = model.find("vocab");
  if (vocab_json == model.end() || !vocab_json->is_object()) {
    return r.Error("model.vocab", "is missing or not an object of token → id");
  }
  Vocab vocab;
  vocab.reserve(vocab_json->size());
  for (const auto& [token, id] : vocab_json->items()) {
    const auto token_id = JsonTokenId(id);
    if (!token_id) {
      return r.Error("model.vocab[\"" + token + "\"]",
                     "is " + id.dump() + "; expected " + kTokenIdRange);
    }
    vocab.emplace(token, *token_id);
  }
  auto merges_json = model.find("merges");
  if (merges_json == model.end()) return r.Error("model.merges", "is missing");
  ASSIGN_OR_RETURN(auto merges, ReadMerges(r, *merges_json));

  BpeOptions options;
  ASSIGN_OR_RETURN(options.ignore_merges, r.Bool(model, "ignore_merges", false, "model"));
  if (auto unk = model.find("unk_token"); unk != model.end() && unk->is_string()) {
    auto it = vocab.find(unk->get<std::string>());
    if (it == vocab.end())
      return r.Error("model.unk_token", "is " + unk->dump() + ", which is not in model.vocab");
    options.unk_id = it->second;
  }
  return BpeModel::Create(std::move(vocab), merges, options, r.path());
}

// Adds one pre-tokenizer (recursing into Sequence) to `pre`; sets *byte_level when it has one.
Status ReadPreTokenizer(const JsonReader& r, const json& node, const std::string& field,
                        PreTokenizer* pre, bool* byte_level) {
  ASSIGN_OR_RETURN(std::string type, r.String(node, "type", field));
  if (type == "Sequence") {
    auto list = node.find("pretokenizers");
    if (list == node.end() || !list->is_array())
      return r.Error(field + ".pretokenizers", "is not an array");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(ReadPreTokenizer(
          r, (*list)[i], field + ".pretokenizers[" + std::to_string(i) + "]", pre, byte_level));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    ASSIGN_OR_RETURN(bool add_prefix_space, r.Bool(node, "add_prefix_space", true, field));
    ASSIGN_OR_RETURN(bool use_regex, r.Bool(node, "use_regex", true, field));
    *byte_level = true;
    return pre->AddByteLevel(add_prefix_space, use_regex);
  }
  if (type == "Split") {
    auto pattern = node.find("pattern");
    if (pattern == node.end() || !pattern->is_object())
      return r.Error(field + ".pattern", "is missing");
    const bool literal = pattern->contains("String");
    auto text = literal ? pattern->find("String") : pattern->find("Regex");
    if (text == pattern->end() || !text->is_string()) {
      return r.Error(field + ".pattern",
                     "is " + pattern->dump() + "; expected {\"Regex\": ...} or {\"String\": ...}");
    }
    auto regex = RegexSplitter::Create(text->get<std::string>(), literal);
    if (!regex.ok()) return r.Error(field + ".pattern", regex.status().message());
    ASSIGN_OR_RETURN(std::string behavior_name, r.String(node, "behavior", field));
    auto behavior = ParseSplitBehavior(behavior_name);
    if (!behavior.ok()) return r.Error(field + ".behavior", behavior.status().message());
    ASSIGN_OR_RETURN(bool invert, r.Bool(node, "invert", false, field));
    pre->AddSplit(std::shared_ptr<const RegexSplitter>(std::move(regex).value()), *behavior,
                  invert);
    return Status::Ok();
  }
  return r.Unsupported(field + ".type",
                       "is \"" + type + "\"; supported: ByteLevel, Split, Sequence");
}

Status ReadDecoder(const JsonReader& r, const json& node, const std::string& field) {
  if (node.is_null()) return Status::Ok();
  ASSIGN_OR_RETURN(std::string type, r.String(node, "type", field));
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    auto list = node.find("decoders");
    if (list == node.end() || !list->is_array())
      return r.Error(field + ".decoders", "is not an array");
    for (size_t i = 0; i < list->size(); ++i)
      RETURN_IF_ERROR(ReadDecoder(r, (*list)[i], field + ".decoders[" + std::to_string(i) + "]"));
    return Status::Ok();
  }
  return r.Unsupported(field + ".type",
                       "is \"" + type + "\"; only the ByteLevel decoder is supported");
}

// The special ids a post-processor puts before and after a single sequence.
Status ReadPostProcessor(const JsonReader& r, const json& node, const std::string& field,
                         TokenizerParts* parts) {
  if (node.is_null()) return Status::Ok();
  ASSIGN_OR_RETURN(std::string type, r.String(node, "type", field));
  if (type == "ByteLevel") return Status::Ok();  // only adjusts offsets
  if (type == "Sequence") {
    auto list = node.find("processors");
    if (list == node.end() || !list->is_array())
      return r.Error(field + ".processors", "is not an array");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(ReadPostProcessor(r, (*list)[i],
                                        field + ".processors[" + std::to_string(i) + "]", parts));
    }
    return Status::Ok();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    // "cls": ["<s>", 0], "sep": ["</s>", 2]
    for (const char* key : {"cls", "sep"}) {
      auto it = node.find(key);
      const auto id = it != node.end() && it->is_array() && it->size() == 2 ? JsonTokenId((*it)[1])
                                                                            : std::nullopt;
      if (!id) {
        return r.Error(field + "." + key, std::string("is not [token, id] with ") + kTokenIdRange);
      }
      auto& target = std::string_view(key) == "cls" ? parts->prefix_ids : parts->suffix_ids;
      target.push_back(*id);
    }
    return Status::Ok();
  }
  if (type != "TemplateProcessing") {
    return r.Unsupported(field + ".type", "is \"" + type +
                                              "\"; supported: TemplateProcessing, ByteLevel, "
                                              "RobertaProcessing, BertProcessing, Sequence");
  }
  auto single = node.find("single");
  if (single == node.end() || !single->is_array())
    return r.Error(field + ".single", "is not an array");
  auto specials = node.find("special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    const std::string item_field = field + ".single[" + std::to_string(i) + "]";
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    auto special = item.find("SpecialToken");
    if (special == item.end())
      return r.Error(item_field, "is " + item.dump() + "; expected Sequence or SpecialToken");
    ASSIGN_OR_RETURN(std::string name, r.String(*special, "id", item_field + ".SpecialToken"));
    const json* entry = nullptr;
    if (specials != node.end() && specials->is_object() && specials->contains(name))
      entry = &(*specials)[name];
    if (entry == nullptr || !entry->contains("ids") || !(*entry)["ids"].is_array()) {
      return r.Error(field + ".special_tokens",
                     "has no ids for \"" + name + "\", which " + item_field + " uses");
    }
    for (const json& id : (*entry)["ids"]) {
      const auto token_id = JsonTokenId(id);
      if (!token_id) {
        return r.Error(field + ".special_tokens[\"" + name + "\"].ids",
                       "holds " + id.dump() + "; expected " + kTokenIdRange);
      }
      (seen_sequence ? parts->suffix_ids : parts->prefix_ids).push_back(*token_id);
    }
  }
  return Status::Ok();
}

Status ReadAddedTokens(const JsonReader& r, const json& root, TokenizerParts* parts) {
  auto list = root.find("added_tokens");
  if (list == root.end() || list->is_null()) return Status::Ok();
  if (!list->is_array()) return r.Error("added_tokens", "is not an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const json& t = (*list)[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    AddedToken token;
    auto id = t.find("id");
    const auto token_id = id != t.end() ? JsonTokenId(*id) : std::nullopt;
    if (!token_id) {
      return r.Error(field + ".id", std::string("is missing or not ") + kTokenIdRange);
    }
    token.id = *token_id;
    ASSIGN_OR_RETURN(token.content, r.String(t, "content", field));
    ASSIGN_OR_RETURN(token.special, r.Bool(t, "special", false, field));
    ASSIGN_OR_RETURN(token.lstrip, r.Bool(t, "lstrip", false, field));
    ASSIGN_OR_RETURN(token.rstrip, r.Bool(t, "rstrip", false, field));
    parts->added_tokens.push_back(std::move(token));
  }
  return Status::Ok();
}

}  // namespace

Result<TokenizerParts> LoadTokenizerJson(const std::string& path) {
  ASSIGN_OR_RETURN(json root, ReadJsonFile(path));
  JsonReader r(path);
  if (!root.is_object()) return r.Error("the top level", "is not a JSON object");
  TokenizerParts parts;
  ASSIGN_OR_RETURN(parts.model, ReadModel(r, Member(root, "model")));

  const json& normalizer = Member(root, "normalizer");
  if (!normalizer.is_null()) {
    ASSIGN_OR_RETURN(std::string type, r.String(normalizer, "type", "normalizer"));
    if (type == "NFC" || type == "NFKC") {
      // NOTE: Qwen2 declares NFC; text that is already NFC (almost all text) tokenizes the same.
      LOG_WARN("{}: normalizer {} is not applied; input text is taken as already normalized", path,
               type);
    } else {
      return r.Unsupported("normalizer.type", "is \"" + type + "\"; supported: none, NFC, NFKC");
    }
  }
  bool byte_level = false;
  const json& pre = Member(root, "pre_tokenizer");
  if (!pre.is_null())
    RETURN_IF_ERROR(ReadPreTokenizer(r, pre, "pre_tokenizer", &parts.pre_tokenizer, &byte_level));
  if (!byte_level) {
    return r.Unsupported("pre_tokenizer",
                         "has no ByteLevel step; only byte-level BPE is supported");
  }
  RETURN_IF_ERROR(ReadDecoder(r, Member(root, "decoder"), "decoder"));
  RETURN_IF_ERROR(ReadPostProcessor(r, Member(root, "post_processor"), "post_processor", &parts));
  RETURN_IF_ERROR(ReadAddedTokens(r, root, &parts));
  return parts;
}

}  // namespace inflight::tokenizer
