#include "tokenizer/json_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace inflight::tokenizer {

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Internal("cannot read " + path + ": " + std::strerror(errno));
  return buffer.str();
}

Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e99999
    return InvalidArgument(path + ": not valid JSON: " + e.what());
  }
}

std::optional<int32_t> JsonTokenId(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto id = value.get<uint64_t>();
    if (id > static_cast<uint64_t>(kMaxTokenId)) return std::nullopt;
    return static_cast<int32_t>(id);
  }
  if (!value.is_number_integer()) return std::nullopt;
  const auto id = value.get<int64_t>();
  if (id < 0 || id > kMaxTokenId) return std::nullopt;
  return static_cast<int32_t>(id);
}

}  // namespace inflight::tokenizer
