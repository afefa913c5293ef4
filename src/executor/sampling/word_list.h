// NVIDIA's word-list tensors (stop_words_list, bad_words_list: INT32 [2, N]) to token sequences.
//
//   words {{7, 8}, {9}}  ->  row 0 (flat ids):    7  8  9  0  ...   padded with 0
//                            row 1 (end offsets): 2  3 -1 -1  ...   cumulative, padded with -1
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "inflight/status.h"
#include "inflight/types.h"

namespace inflight::sampling {

// Word i is flat[offsets[i-1] .. offsets[i]) (offsets[-1] = 0). The offsets end at the first -1;
// every entry after it must be -1 too. Offsets must be non-decreasing and at most flat.size().
// Errors (kInvalidArgument) name `tensor_name`, the index and the bad offset.
// NOTE: an empty word (two equal offsets) is dropped: it would match everywhere, and NVIDIA's
// preprocessing never writes one.
Result<std::vector<VecTokens>> ParseWordList(std::span<const std::int32_t> flat,
                                             std::span<const std::int32_t> offsets,
                                             const char* tensor_name);

}  // namespace inflight::sampling
