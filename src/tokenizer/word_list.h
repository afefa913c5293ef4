// Word lists (bad words, stop words) in the tensor format of NVIDIA's preprocessing model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inflight::tokenizer {

class Tokenizer;

// Splits one BAD_WORDS_DICT / STOP_WORDS_DICT element into words the way Python's csv.reader
// reads one line: commas separate words, a double-quoted word may hold commas, "" inside quotes is
// a quote. Words are not trimmed ("a, b" gives "a" and " b", and " b" tokenizes with its space).
std::vector<std::string> SplitCsvWords(std::string_view line);

// Ids of each word (one entry per word, empty for ""), encoded without special tokens.
Result<std::vector<std::vector<int32_t>>> TokenizeWords(const Tokenizer& tokenizer,
                                                        const std::vector<std::string>& words);

// [batch, 2, width] int32, row-major. Per batch row: row 0 holds the words' ids back to back,
// padded with 0; row 1 holds the cumulative end offset of each word, padded with -1.
// width = max(1, the most ids any batch row has), so a row without words is [[0], [-1]].
struct WordListTensor {
  int64_t batch = 0;
  int64_t width = 0;
  std::vector<int32_t> data;
  int32_t at(int64_t b, int64_t row, int64_t i) const { return data[(b * 2 + row) * width + i]; }
};

// words_per_row[b] = the tokenized words of batch row b; words with no ids are skipped.
WordListTensor PackWordLists(const std::vector<std::vector<std::vector<int32_t>>>& words_per_row);

}  // namespace inflight::tokenizer
