#include "tokenizer/pre_tokenizer.h"

namespace inflight::tokenizer {

void PreTokenizer::AddSplit(std::shared_ptr<const RegexSplitter> regex, SplitBehavior behavior,
                            bool invert) {
  steps_.push_back({std::move(regex), behavior, invert, false});
}

Status PreTokenizer::AddByteLevel(bool add_prefix_space, bool use_regex) {
  Step step;
  step.add_prefix_space = add_prefix_space;
  if (use_regex) {
    // One compiled GPT-2 pattern for every tokenizer in the process.
    static const auto gpt2 = []() -> std::shared_ptr<const RegexSplitter> {
      auto r = RegexSplitter::Create(kGpt2SplitPattern, /*literal=*/false);
      return r.ok() ? std::shared_ptr<const RegexSplitter>(std::move(r).value()) : nullptr;
    }();
    INFLIGHT_CHECK(gpt2 != nullptr, "GPT-2 split pattern does not compile");
    step.regex = gpt2;
  }
  steps_.push_back(std::move(step));
  return Status::Ok();
}

Result<std::vector<std::string>> PreTokenizer::Pieces(std::string_view text) const {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.emplace_back(text);
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    next.reserve(pieces.size());
    for (std::string& piece : pieces) {
      // As tokenizers' ByteLevel: the space goes in front of every piece it sees.
      if (step.add_prefix_space && piece.front() != ' ') piece.insert(piece.begin(), ' ');
      if (!step.regex) {
        next.push_back(std::move(piece));
        continue;
      }
      ASSIGN_OR_RETURN(auto parts, step.regex->Split(piece, step.behavior, step.invert));
      for (auto& p : parts) next.push_back(std::move(p));
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace inflight::tokenizer
