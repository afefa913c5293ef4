// A 128-bit digest of files' bytes, for cache keys (not for security): two 64-bit XXH64-style hashes
// with different seeds, computed over chunks on several threads.
#pragma once

#include <string>
#include <vector>

#include "inflight/status.h"

namespace inflight::model {

// 32 hex digits over, in order, each file's name (the last path component), size and every byte,
// then `extra`. An unreadable file is an error naming it.
Result<std::string> HashFiles(const std::vector<std::string>& paths, const std::string& extra);

}  // namespace inflight::model
