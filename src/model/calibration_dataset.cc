#include "model/calibration_dataset.h"

#include <cctype>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;

class SampleReader {
 public:
  explicit SampleReader(const CalibrationDatasetOptions& o) : o_(o) {}

  bool full() const { return static_cast<std::int64_t>(samples_.size()) >= o_.calib_size; }
  std::vector<VecTokens> Take() { return std::move(samples_); }

  Status AddText(const std::string& text, const std::string& where) {
    if (tokenizer_ == nullptr) {
      if (o_.tokenizer_dir.empty()) {
        return InvalidArgument(where +
                               " is text and no tokenizer was given (--tokenizer_dir); "
                               "give a tokenizer or the samples' input_ids");
      }
      auto loaded = tokenizer::Tokenizer::Load(o_.tokenizer_dir);
      if (!loaded.ok()) {
        return InvalidArgument(where + " is text and the tokenizer of " + o_.tokenizer_dir +
                               " cannot be loaded: " + loaded.status().message());
      }
      tokenizer_ = std::move(*loaded);
    }
    auto ids = tokenizer_->Encode(text, /*add_special_tokens=*/true);
    if (!ids.ok()) return InvalidArgument(where + ": " + ids.status().message());
    return AddIds(std::move(*ids), where);
  }

  Status AddIds(VecTokens ids, const std::string& where) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= o_.vocab_size) {
        return InvalidArgument(where + " token " + std::to_string(i) + " is id " +
                               std::to_string(ids[i]) + "; accepted: [0, " +
                               std::to_string(o_.vocab_size) + ") (the model's vocab_size)");
      }
    }
    if (static_cast<std::int64_t>(ids.size()) > o_.max_seq_length) {
      ids.resize(static_cast<std::size_t>(o_.max_seq_length));
    }
    if (!ids.empty()) samples_.push_back(std::move(ids));
    return Status::Ok();
  }

  // A JSON record: an object with input_ids, text or article, or (in an array) a string.
  Status AddRecord(const json& r, const std::string& where) {
    if (r.is_string()) return AddText(r.get<std::string>(), where);
    if (!r.is_object()) {
      return InvalidArgument(where + " is " + std::string(r.type_name()) +
                             "; accepted: an object with input_ids, text or article, or a string");
    }
    if (const auto it = r.find("input_ids"); it != r.end()) {
      if (!it->is_array()) {
        return InvalidArgument(where + " input_ids is " + std::string(it->type_name()) +
                               "; accepted: an array of token ids");
      }
      VecTokens ids;
      for (const json& v : *it) {
        if (!v.is_number_integer()) {
          return InvalidArgument(where + " input_ids holds " + v.dump() +
                                 "; accepted: integer token ids");
        }
        const auto id = v.get<std::int64_t>();
        ids.push_back(id < 0 || id > INT32_MAX ? -1 : static_cast<TokenIdType>(id));
      }
      return AddIds(std::move(ids), where);
    }
    for (const char* field : {"text", "article"}) {
      const auto it = r.find(field);
      if (it == r.end()) continue;
      if (!it->is_string()) {
        return InvalidArgument(where + " " + field + " is " + std::string(it->type_name()) +
                               "; accepted: a string");
      }
      return AddText(it->get<std::string>(), where);
    }
    return InvalidArgument(where + " has none of the fields input_ids, text, article");
  }

 private:
  const CalibrationDatasetOptions& o_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::vector<VecTokens> samples_;
};

}  // namespace

Result<std::vector<VecTokens>> ReadCalibrationDataset(const CalibrationDatasetOptions& o) {
  const std::string name = "--calib_dataset " + o.path;
  std::ifstream in(o.path, std::ios::binary);
  if (!in) return NotFound(name + ": cannot open the file");
  // The first character says the format; lines are read as they come (a dataset's JSON lines may
  // be gigabytes, of which --calib_size samples are wanted).
  char first = 0;
  while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
  }
  in.clear();
  in.seekg(0);
  SampleReader reader(o);
  if (first == '[') {
    std::stringstream buffer;
    buffer << in.rdbuf();
    const json all = json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
    if (all.is_discarded() || !all.is_array()) {
      return InvalidArgument(name + " starts with '[' but is not one JSON array");
    }
    for (std::size_t i = 0; i < all.size() && !reader.full(); ++i) {
      RETURN_IF_ERROR(reader.AddRecord(all[i], name + " element " + std::to_string(i)));
    }
  } else {
    const bool json_lines = first == '{';
    std::string line;
    for (std::int64_t n = 1; !reader.full() && std::getline(in, line); ++n) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      const std::string where = name + " line " + std::to_string(n);
      if (!json_lines) {
        RETURN_IF_ERROR(reader.AddText(line, where));
        continue;
      }
      const json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_discarded()) {
        return InvalidArgument(where +
                               " is not JSON (the file is read as JSON lines: its first "
                               "character is '{')");
      }
      RETURN_IF_ERROR(reader.AddRecord(record, where));
    }
  }
  std::vector<VecTokens> samples = reader.Take();
  if (samples.empty()) return InvalidArgument(name + " holds no non-empty sample");
  return samples;
}

}  // namespace inflight::model
