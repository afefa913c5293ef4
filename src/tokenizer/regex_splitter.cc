#include "tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "common/utf8.h"

namespace inflight::tokenizer {
namespace {

std::string Pcre2ErrorText(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (n < 0) return "PCRE2 error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

}  // namespace

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

Result<SplitBehavior> ParseSplitBehavior(std::string_view name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return InvalidArgument("split behavior \"" + std::string(name) +
                         "\" is not one of: Removed, Isolated, MergedWithPrevious, "
                         "MergedWithNext, Contiguous");
}

RegexSplitter::RegexSplitter(std::string pattern, std::unique_ptr<Impl> impl)
    : pattern_(std::move(pattern)), impl_(std::move(impl)) {}

RegexSplitter::~RegexSplitter() = default;

Result<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(std::string_view pattern,
                                                             bool literal) {
  // PCRE2 refuses UCP together with LITERAL; a literal has no classes for UCP to change.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  auto impl = std::make_unique<Impl>();
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                             &error_code, &error_offset, nullptr);
  if (impl->code == nullptr) {
    return InvalidArgument("split regex \"" + std::string(pattern) +
                           "\" does not compile at offset " + std::to_string(error_offset) + ": " +
                           Pcre2ErrorText(error_code));
  }
  // NOTE: JIT is an optional speed-up; when unavailable the interpreter gives the same matches.
  (void)pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<RegexSplitter>(new RegexSplitter(std::string(pattern), std::move(impl)));
}

Result<std::vector<std::pair<size_t, size_t>>> RegexSplitter::FindAll(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr));
  if (!md) return Internal("cannot allocate PCRE2 match data");
  std::vector<std::pair<size_t, size_t>> matches;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  uint32_t check = 0;  // the first call validates the UTF-8; later calls skip it
  while (offset <= text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), offset, check, md.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Long runs of whitespace against a lookahead can exhaust the JIT's default stack.
      rc = pcre2_match(impl_->code, subject, text.size(), offset, check | PCRE2_NO_JIT, md.get(),
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return InvalidArgument("split regex \"" + pattern_ + "\" failed on the text at byte " +
                             std::to_string(offset) + ": " + Pcre2ErrorText(rc));
    }
    check = PCRE2_NO_UTF_CHECK;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t begin = ov[0], end = ov[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      if (begin >= text.size()) break;
      // Empty match: step over one whole character so the next search starts on a boundary.
      offset = begin + std::max<size_t>(1, Utf8SequenceLength(text, begin));
    }
  }
  return matches;
}

Result<std::vector<std::string>> RegexSplitter::Split(std::string_view text, SplitBehavior behavior,
                                                      bool invert) const {
  ASSIGN_OR_RETURN(auto matches, FindAll(text));
  struct Segment {
    size_t begin, end;
    bool delimiter;
  };
  std::vector<Segment> segments;
  size_t prev = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > prev) segments.push_back({prev, begin, invert});
    segments.push_back({begin, end, !invert});
    prev = end;
  }
  if (prev < text.size()) segments.push_back({prev, text.size(), invert});

  // Pieces as [begin, end) ranges; the merge rules follow tokenizers' SplitDelimiterBehavior.
  std::vector<std::pair<size_t, size_t>> pieces;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& s : segments)
        if (!s.delimiter) pieces.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& s : segments) pieces.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_delim = false;
      for (const auto& s : segments) {
        if (s.delimiter && !prev_delim && !pieces.empty()) {
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        prev_delim = s.delimiter;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_delim = false;  // walking right to left: was the segment after this a delimiter
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->delimiter && !next_delim && !pieces.empty()) {
          pieces.back().first = it->begin;
        } else {
          pieces.emplace_back(it->begin, it->end);
        }
        next_delim = it->delimiter;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool prev_delim = false;
      for (const auto& s : segments) {
        if (s.delimiter && prev_delim && !pieces.empty()) {
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        prev_delim = s.delimiter;
      }
      break;
    }
  }
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& [begin, end] : pieces)
    if (end > begin) out.emplace_back(text.substr(begin, end - begin));
  return out;
}

}  // namespace inflight::tokenizer
