#include "bls/text_stream.h"

namespace inflight::bls {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// `text` without what the next ids may still change.
std::string_view Settled(std::string_view text) {
  while (text.size() >= kReplacement.size() &&
         text.substr(text.size() - kReplacement.size()) == kReplacement) {
    text.remove_suffix(kReplacement.size());
  }
  // transformers' clean_up_tokenization removes a space before punctuation and contractions
  // (" ." -> ".", " 's" -> "'s"): a trailing space waits for the next piece.
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

}  // namespace

Result<std::string> TextStream::Push(std::span<const int32_t> ids) {
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  ASSIGN_OR_RETURN(std::string all, tokenizer_.Decode(ids_, skip_special_tokens_));
  const std::string_view settled = Settled(all);
  if (settled.size() <= sent_.size() || settled.substr(0, sent_.size()) != sent_)
    return std::string();
  std::string piece(settled.substr(sent_.size()));
  sent_.assign(settled);
  return piece;
}

Result<std::string> TextStream::Finish() {
  ASSIGN_OR_RETURN(std::string all, tokenizer_.Decode(ids_, skip_special_tokens_));
  if (all.size() < sent_.size() || all.compare(0, sent_.size(), sent_) != 0) {
    return Internal("streamed text \"" + sent_ + "\" is not a prefix of the final text \"" + all +
                    "\"");
  }
  std::string rest = all.substr(sent_.size());
  sent_ = std::move(all);
  return rest;
}

}  // namespace inflight::bls
