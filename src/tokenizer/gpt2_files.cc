// GPT-2's original files: vocab.json maps byte-level token → id; merges.txt lists one merge per
// line ("Ġ t"), best first, after an optional "#version" header.
#include "tokenizer/json_file.h"
#include "tokenizer/tokenizer_parts.h"

namespace inflight::tokenizer {
namespace {

Result<Vocab> ReadVocabJson(const std::string& path) {
  ASSIGN_OR_RETURN(nlohmann::json json, ReadJsonFile(path));
  if (!json.is_object()) {
    return InvalidArgument(path + ": expected a JSON object of token → id, got a " +
                           std::string(json.type_name()));
  }
  Vocab vocab;
  vocab.reserve(json.size());
  for (const auto& [token, id] : json.items()) {
    const auto token_id = JsonTokenId(id);
    if (!token_id) {
      return InvalidArgument(path + ": the id of token \"" + token + "\" is " + id.dump() +
                             "; expected " + kTokenIdRange);
    }
    vocab.emplace(token, *token_id);
  }
  return vocab;
}

Result<std::vector<std::pair<std::string, std::string>>> ReadMergesTxt(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_begin = 0;
  for (size_t line_no = 1; line_begin < text.size(); ++line_no) {
    size_t line_end = text.find('\n', line_begin);
    if (line_end == std::string::npos) line_end = text.size();
    std::string_view line(text.data() + line_begin, line_end - line_begin);
    line_begin = line_end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      return InvalidArgument(path + " line " + std::to_string(line_no) + ": \"" +
                             std::string(line) + "\" is not two tokens separated by one space");
    }
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return merges;
}

}  // namespace

Result<TokenizerParts> LoadGpt2Files(const std::string& vocab_path,
                                     const std::string& merges_path) {
  ASSIGN_OR_RETURN(Vocab vocab, ReadVocabJson(vocab_path));
  ASSIGN_OR_RETURN(auto merges, ReadMergesTxt(merges_path));
  TokenizerParts parts;
  ASSIGN_OR_RETURN(parts.model, BpeModel::Create(std::move(vocab), merges, BpeOptions{},
                                                 vocab_path + " + " + merges_path));
  RETURN_IF_ERROR(parts.pre_tokenizer.AddByteLevel(/*add_prefix_space=*/false, /*use_regex=*/true));
  return parts;
}

}  // namespace inflight::tokenizer
