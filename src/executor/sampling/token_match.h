// Suffix matching over a token sequence that lives in two pieces (prompt + generated, or generated
// + the token just sampled), so no caller has to concatenate.
#pragma once

#include <span>

#include "inflight/types.h"

namespace inflight::sampling {

// True when the sequence head ++ tail ends with `suffix`. An empty suffix always matches.
bool EndsWith(std::span<const TokenIdType> head, std::span<const TokenIdType> tail,
              std::span<const TokenIdType> suffix);

}  // namespace inflight::sampling
