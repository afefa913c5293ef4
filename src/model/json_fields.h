// Typed access to the fields of one JSON object (a config.json, or an object inside one), with
// errors that name where the object came from, the field and the value, and a record of which
// fields were looked at, so that a reader can tell the user what it did not read.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inflight/status.h"

namespace inflight::model {

class JsonFields {
 public:
  using json = nlohmann::json;

  // `obj` must outlive this; `where` prefixes every error ("ckpt/config.json", "... rope_scaling").
  JsonFields(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  const json& object() const { return obj_; }

  // Every accessor below marks the key as read, whether or not it is present.
  bool Has(const char* key) const;         // present and not null
  bool Present(const char* key) const;     // present, null included
  const json* Get(const char* key) const;  // nullptr when absent or null
  void MarkRead(const char* key) const { read_.insert(key); }

  Status Error(const char* key, const std::string& what) const;  // InvalidArgument
  std::string Dump(const char* key) const;  // the value as JSON text, or "absent"

  // Absent or null: an error naming the key when `required`, else *out keeps its value.
  Status Int(const char* key, std::int64_t* out, bool required = true) const;
  Status Int32(const char* key, std::int32_t* out, bool required = true) const;
  Status Double(const char* key, double* out, bool required = true) const;
  Status Float(const char* key, float* out, bool required = true) const;
  Status Bool(const char* key, bool* out, bool required = true) const;
  Status String(const char* key, std::string* out, bool required = true) const;
  // Token ids: an integer, null, or (Llama 3.1 Instruct) a list whose first element is taken.
  Status TokenId(const char* key, std::optional<std::int32_t>* out) const;

  // The object's keys that no accessor looked at and that are not in `ignored`, sorted, each
  // prefixed with `prefix` ("rope_scaling." for a nested object).
  std::vector<std::string> Unread(const std::set<std::string>& ignored,
                                  const std::string& prefix = "") const;

 private:
  const json& obj_;
  std::string where_;
  mutable std::set<std::string> read_;
};

}  // namespace inflight::model
