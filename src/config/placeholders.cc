#include "config/placeholders.h"

#include <cctype>
#include <map>

#include "config/parameters.h"

namespace inflight::config {
namespace {

namespace pb = google::protobuf;

// What the structural keys of all_models/inflight_batcher_llm take, and the default
// fill_template.py writes when it fills a file without them (tools/fill_template.py: DEFAULTS).
struct KeyHint {
  std::string_view key;
  std::string_view value;
  std::string_view fill_default;  // empty: no default, the key must be given
};
constexpr KeyHint kKeyHints[] = {
    {"triton_backend", "inflight", "inflight"},
    {"triton_max_batch_size", "<integer>", ""},
    {"decoupled_mode", "<true|false>", ""},
    {"max_queue_delay_microseconds", "<integer>", "0"},
    {"max_queue_size", "<integer>", "0"},
    {"preprocessing_instance_count", "<integer>", ""},
    {"postprocessing_instance_count", "<integer>", ""},
    {"bls_instance_count", "<integer>", ""},
    {"logits_datatype", "<TYPE_FP32|TYPE_FP16>", "TYPE_FP32"},
    {"encoder_input_features_data_type", "<TYPE_FP16|TYPE_BF16|TYPE_FP32>", "TYPE_FP16"},
    {"prompt_embedding_table_data_type", "<TYPE_FP16|TYPE_BF16|TYPE_FP32>", "TYPE_FP16"},
};

const KeyHint* HintFor(std::string_view key) {
  for (const KeyHint& hint : kKeyHints) {
    if (hint.key == key) return &hint;
  }
  return nullptr;
}

bool IsIdentifierStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Walks every string field of `message` except ModelParameter.string_value (where a placeholder
// means "unset"); reports the first that is an unfilled placeholder.
Status CheckMessage(const pb::Message& message, const std::string& field_path,
                    const std::string& path) {
  const pb::Reflection* reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const std::string name = field_path.empty() ? field->name() : field_path + "." + field->name();
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
      for (int i = 0; i < count; ++i) {
        const pb::Message& child = field->is_repeated()
                                       ? reflection->GetRepeatedMessage(message, field, i)
                                       : reflection->GetMessage(message, field);
        RETURN_IF_ERROR(CheckMessage(child, name, path));
      }
      continue;
    }
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING) continue;
    if (field->containing_type() == inference::ModelParameter::descriptor()) continue;
    const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
    for (int i = 0; i < count; ++i) {
      const std::string value = field->is_repeated()
                                    ? reflection->GetRepeatedString(message, field, i)
                                    : reflection->GetString(message, field);
      if (!IsUnfilledPlaceholder(value)) continue;
      const std::vector<PlaceholderUse> uses = FindPlaceholders(value);
      const std::string key = uses.empty() ? value : uses.front().key;
      const KeyHint* hint = HintFor(key);
      return InvalidArgument(path + ": " + name + " is the unfilled template placeholder \"" +
                             value + "\"; set it with fill_template.py -i " + path + " " + key +
                             ":" + std::string(hint ? hint->value : "<value>"));
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<PlaceholderUse> FindPlaceholders(std::string_view text) {
  std::vector<PlaceholderUse> uses;
  int line = 1;
  char quote = 0;  // the open string's quote character, 0 outside strings
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      quote = 0;  // text format strings do not span lines
      continue;
    }
    if (quote != 0) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
        continue;
      }
      if (c == quote) {
        quote = 0;
        continue;
      }
    } else if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    } else if (c == '"' || c == '\'') {
      quote = c;
      continue;
    }
    if (c != '$' || i + 2 >= text.size() || text[i + 1] != '{' || !IsIdentifierStart(text[i + 2])) {
      continue;
    }
    std::size_t end = i + 2;
    while (end < text.size() && IsIdentifierChar(text[end])) ++end;
    if (end >= text.size() || text[end] != '}') continue;
    uses.push_back({std::string(text.substr(i + 2, end - i - 2)), line, quote != 0});
    i = end;
  }
  return uses;
}

Status UnfilledPlaceholdersError(const std::string& path, const std::vector<PlaceholderUse>& uses,
                                 const std::string& parse_error) {
  std::map<std::string, std::vector<int>> lines;  // key -> lines, keys in first-seen order below
  std::vector<std::string> order;
  for (const PlaceholderUse& use : uses) {
    if (use.in_string) continue;
    auto [it, inserted] = lines.try_emplace(use.key);
    if (inserted) order.push_back(use.key);
    it->second.push_back(use.line);
  }
  std::string listed, command, defaults;
  for (const std::string& key : order) {
    const std::vector<int>& at = lines[key];
    listed +=
        (listed.empty() ? "" : ", ") + ("${" + key + "} (line" + (at.size() > 1 ? "s " : " "));
    for (std::size_t i = 0; i < at.size(); ++i) {
      listed += (i ? ", " : "") + std::to_string(at[i]);
    }
    listed += ")";
    const KeyHint* hint = HintFor(key);
    command +=
        (command.empty() ? "" : ",") + key + ":" + std::string(hint ? hint->value : "<value>");
    if (hint && !hint->fill_default.empty()) {
      defaults += (defaults.empty() ? "" : ", ") + key + " " + std::string(hint->fill_default);
    }
  }
  std::string message = path +
                        ": unfilled template placeholders where a value is needed: " + listed +
                        ". Set them with fill_template.py (each placeholder's key is " +
                        "the fill_template.py key): fill_template.py -i " + path + " " + command;
  if (!defaults.empty()) {
    message +=
        ". fill_template.py writes these defaults when it fills the file without them: " + defaults;
  }
  return InvalidArgument(message + " (parse error: " + parse_error + ")");
}

Status CheckNoPlaceholderFields(const inference::ModelConfig& config, const std::string& path) {
  return CheckMessage(config, "", path);
}

}  // namespace inflight::config
