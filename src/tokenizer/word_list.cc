#include "tokenizer/word_list.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace inflight::tokenizer {

std::vector<std::string> SplitCsvWords(std::string_view line) {
  std::vector<std::string> words;
  if (line.empty()) return words;  // csv.reader gives no field for an empty line
  std::string word;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        word.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        word.push_back(c);
      }
    } else if (c == ',') {
      words.push_back(std::move(word));
      word.clear();
    } else if (c == '"' && word.empty()) {
      quoted = true;  // a quote opens a quoted word only at its start, as in csv.reader
    } else {
      word.push_back(c);
    }
  }
  words.push_back(std::move(word));
  return words;
}

Result<std::vector<std::vector<int32_t>>> TokenizeWords(const Tokenizer& tokenizer,
                                                        const std::vector<std::string>& words) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(words.size());
  for (const std::string& word : words) {
    auto ids = tokenizer.Encode(word, /*add_special_tokens=*/false);
    if (!ids.ok()) {
      return Status(ids.status().code(), "word \"" + word + "\": " + ids.status().message());
    }
    out.push_back(std::move(ids).value());
  }
  return out;
}

WordListTensor PackWordLists(const std::vector<std::vector<std::vector<int32_t>>>& words_per_row) {
  WordListTensor t;
  t.batch = static_cast<int64_t>(words_per_row.size());
  t.width = 1;
  for (const auto& words : words_per_row) {
    int64_t n = 0;
    for (const auto& ids : words) n += static_cast<int64_t>(ids.size());
    t.width = std::max(t.width, n);
  }
  t.data.resize(static_cast<size_t>(t.batch * 2 * t.width));
  for (int64_t b = 0; b < t.batch; ++b) {
    int32_t* ids_row = t.data.data() + (b * 2) * t.width;
    int32_t* offsets_row = ids_row + t.width;
    std::fill(ids_row, ids_row + t.width, 0);
    std::fill(offsets_row, offsets_row + t.width, -1);
    int32_t end = 0;
    int64_t word_index = 0;
    for (const auto& ids : words_per_row[static_cast<size_t>(b)]) {
      if (ids.empty()) continue;
      std::copy(ids.begin(), ids.end(), ids_row + end);
      end += static_cast<int32_t>(ids.size());
      offsets_row[word_index++] = end;
    }
  }
  return t;
}

}  // namespace inflight::tokenizer
