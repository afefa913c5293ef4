#include "config/model_config_loader.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/utf8.h"
#include "config/placeholders.h"

namespace inflight::config {
namespace {

namespace pb = google::protobuf;
using OrderedJson = nlohmann::ordered_json;

// Keeps the first error only: later ones are usually consequences of the first.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!has_error_) {
      has_error_ = true;
      // protobuf counts from 0; editors count from 1.
      error_ = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) +
               ": " + message;
    }
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  const std::string& error() const { return error_; }

 private:
  bool has_error_ = false;
  std::string error_;
};

bool Is64BitInteger(const pb::FieldDescriptor* field) {
  return field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64 ||
         field->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT64;
}

void StringToNumber(OrderedJson& value, const pb::FieldDescriptor* field) {
  if (!value.is_string()) return;
  const std::string& s = value.get_ref<const std::string&>();
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size()) value = v;
  } else {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size()) value = v;
  }
}

void NumbersFor64BitFields(OrderedJson& object, const pb::Descriptor* descriptor);

// Converts one field's value (a single element, never a JSON array of repeated values).
void ConvertElement(OrderedJson& value, const pb::FieldDescriptor* field) {
  if (Is64BitInteger(field)) {
    StringToNumber(value, field);
  } else if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && value.is_object()) {
    NumbersFor64BitFields(value, field->message_type());
  }
}

void NumbersFor64BitFields(OrderedJson& object, const pb::Descriptor* descriptor) {
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const pb::FieldDescriptor* field = descriptor->field(i);
    auto it = object.find(field->name());
    if (it == object.end()) continue;
    if (field->is_map()) {
      if (!it->is_object()) continue;
      const pb::FieldDescriptor* value_field = field->message_type()->map_value();
      for (auto& [key, value] : it->items()) ConvertElement(value, value_field);
    } else if (field->is_repeated()) {
      if (!it->is_array()) continue;
      for (auto& element : *it) ConvertElement(element, field);
    } else {
      ConvertElement(*it, field);
    }
  }
}

}  // namespace

Result<inference::ModelConfig> ParseModelConfigText(std::string_view pbtxt) {
  if (pbtxt.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument("model config text is too large: " + std::to_string(pbtxt.size()) +
                           " bytes");
  }
  FirstErrorCollector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  inference::ModelConfig config;
  pb::io::ArrayInputStream input(pbtxt.data(), static_cast<int>(pbtxt.size()));
  if (!parser.Parse(&input, &config)) {
    return InvalidArgument("failed to parse model config: " +
                           (errors.has_error() ? errors.error() : std::string("unknown error")));
  }
  return config;
}

Result<inference::ModelConfig> LoadModelConfigFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFound("cannot open model config file " + path);
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return Internal("failed to read model config file " + path);
  const std::string text = contents.str();
  auto config = ParseModelConfigText(text);
  if (!config.ok()) {
    // Most often a template placeholder fill_template.py was not given: name it and its key.
    const std::vector<PlaceholderUse> uses = FindPlaceholders(text);
    if (std::any_of(uses.begin(), uses.end(), [](const auto& u) { return !u.in_string; })) {
      return UnfilledPlaceholdersError(path, uses, config.status().message());
    }
    return Status(config.status().code(), path + ": " + config.status().message());
  }
  RETURN_IF_ERROR(CheckNoPlaceholderFields(*config, path));
  return config;
}

Result<inference::ModelConfig> ParseModelConfigJson(std::string_view json) {
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  inference::ModelConfig config;
  auto status =
      pb::util::JsonStringToMessage(pb::StringPiece(json.data(), json.size()), &config, options);
  if (!status.ok()) {
    return InvalidArgument("failed to parse model config JSON: " + status.ToString());
  }
  return config;
}

Result<std::string> ModelConfigToJson(const inference::ModelConfig& config) {
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string printed;
  auto status = pb::util::MessageToJsonString(config, &printed, options);
  if (!status.ok()) return Internal("failed to print model config as JSON: " + status.ToString());
  // NOTE: a string field may hold bytes that are not UTF-8 (config.pbtxt is read as bytes, and
  // protobuf prints them as they are); the JSON parser refuses those, so they become U+FFFD, as
  // the JSON a Triton backend reads must be text. Found by fuzz_model_config_text.
  OrderedJson json = OrderedJson::parse(Utf8Lossy(printed), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Internal("protobuf printed JSON that does not parse");
  NumbersFor64BitFields(json, inference::ModelConfig::descriptor());
  return json.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace inflight::config
