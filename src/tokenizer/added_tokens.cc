#include "tokenizer/added_tokens.h"

#include <algorithm>

namespace inflight::tokenizer {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[tokens_[i].content.front()].push_back(i);
  }
  for (auto& [byte, list] : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

std::vector<TextSegment> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<TextSegment> out;
  if (by_first_byte_.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return out;
  }
  size_t plain_begin = 0;  // start of the plain text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    auto it = by_first_byte_.find(text[pos]);
    const AddedToken* match = nullptr;
    if (it != by_first_byte_.end()) {
      for (size_t index : it->second) {
        if (text.substr(pos).starts_with(tokens_[index].content)) {
          match = &tokens_[index];
          break;
        }
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + match->content.size();
    if (match->lstrip)
      while (begin > plain_begin && IsAsciiSpace(text[begin - 1])) --begin;
    if (match->rstrip)
      while (end < text.size() && IsAsciiSpace(text[end])) ++end;
    if (begin > plain_begin) out.push_back({text.substr(plain_begin, begin - plain_begin), -1});
    out.push_back({text.substr(begin, end - begin), match->id});
    plain_begin = pos = end;
  }
  if (plain_begin < text.size()) out.push_back({text.substr(plain_begin), -1});
  return out;
}

}  // namespace inflight::tokenizer
