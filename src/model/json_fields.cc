#include "model/json_fields.h"

#include <climits>

#include "common/logging.h"

namespace inflight::model {

bool JsonFields::Has(const char* key) const {
  read_.insert(key);
  return obj_.contains(key) && !obj_[key].is_null();
}

bool JsonFields::Present(const char* key) const {
  read_.insert(key);
  return obj_.contains(key);
}

const nlohmann::json* JsonFields::Get(const char* key) const {
  return Has(key) ? &obj_[key] : nullptr;
}

Status JsonFields::Error(const char* key, const std::string& what) const {
  return InvalidArgument(where_ + ": \"" + key + "\" " + what);
}

std::string JsonFields::Dump(const char* key) const {
  return obj_.contains(key) ? obj_[key].dump() : "absent";
}

Status JsonFields::Int(const char* key, std::int64_t* out, bool required) const {
  const json* v = Get(key);
  if (v == nullptr) return required ? Error(key, "is required (an integer)") : Status::Ok();
  if (!v->is_number_integer()) return Error(key, "is " + v->dump() + ", expected an integer");
  *out = v->get<std::int64_t>();
  return Status::Ok();
}

Status JsonFields::Int32(const char* key, std::int32_t* out, bool required) const {
  std::int64_t v = *out;
  RETURN_IF_ERROR(Int(key, &v, required));
  if (v < INT32_MIN || v > INT32_MAX) {
    return Error(key, "is " + std::to_string(v) + ", outside the 32-bit range");
  }
  *out = static_cast<std::int32_t>(v);
  return Status::Ok();
}

Status JsonFields::Double(const char* key, double* out, bool required) const {
  const json* v = Get(key);
  if (v == nullptr) return required ? Error(key, "is required (a number)") : Status::Ok();
  if (!v->is_number()) return Error(key, "is " + v->dump() + ", expected a number");
  *out = v->get<double>();
  return Status::Ok();
}

Status JsonFields::Float(const char* key, float* out, bool required) const {
  double d = *out;
  RETURN_IF_ERROR(Double(key, &d, required));
  *out = static_cast<float>(d);
  return Status::Ok();
}

Status JsonFields::Bool(const char* key, bool* out, bool required) const {
  const json* v = Get(key);
  if (v == nullptr) return required ? Error(key, "is required (true or false)") : Status::Ok();
  if (!v->is_boolean()) return Error(key, "is " + v->dump() + ", expected true or false");
  *out = v->get<bool>();
  return Status::Ok();
}

Status JsonFields::String(const char* key, std::string* out, bool required) const {
  const json* v = Get(key);
  if (v == nullptr) return required ? Error(key, "is required (a string)") : Status::Ok();
  if (!v->is_string()) return Error(key, "is " + v->dump() + ", expected a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

Status JsonFields::TokenId(const char* key, std::optional<std::int32_t>* out) const {
  const json* v = Get(key);
  if (v == nullptr) return Status::Ok();
  if (v->is_array() && !v->empty()) {
    if (v->size() > 1) {
      LOG_INFO("{}: \"{}\" lists {} ids; using the first, {}", where_, key, v->size(),
               (*v)[0].dump());
    }
    v = &(*v)[0];
  }
  if (!v->is_number_integer()) return Error(key, "is " + v->dump() + ", expected a token id");
  *out = static_cast<std::int32_t>(v->get<std::int64_t>());
  return Status::Ok();
}

std::vector<std::string> JsonFields::Unread(const std::set<std::string>& ignored,
                                            const std::string& prefix) const {
  std::vector<std::string> out;
  for (const auto& [key, value] : obj_.items()) {
    if (read_.count(key) == 0 && ignored.count(key) == 0) out.push_back(prefix + key);
  }
  return out;  // nlohmann::json objects iterate in sorted key order
}

}  // namespace inflight::model
