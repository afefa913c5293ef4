#include "server/request_validation.h"

#include <cstring>
#include <set>

#include "server/backend_objects.h"

namespace inflight::server {

namespace {

int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status CheckBytesElements(const Tensor& t, int64_t expected_elements) {
  size_t offset = 0;
  int64_t count = 0;
  while (offset < t.data.size()) {
    if (t.data.size() - offset < 4) {
      return InvalidArgument("input '" + t.name + "' BYTES data is malformed: " +
                             std::to_string(t.data.size() - offset) +
                             " trailing bytes cannot hold a 4-byte length prefix");
    }
    uint32_t len = 0;
    std::memcpy(&len, t.data.data() + offset, 4);  // little-endian hosts only, as Triton
    offset += 4;
    if (t.data.size() - offset < len) {
      return InvalidArgument("input '" + t.name + "' BYTES data is malformed: element " +
                             std::to_string(count) + " claims " + std::to_string(len) +
                             " bytes but only " + std::to_string(t.data.size() - offset) +
                             " remain");
    }
    offset += len;
    ++count;
  }
  if (count != expected_elements) {
    return InvalidArgument("expected " + std::to_string(expected_elements) +
                           " string elements for inference input '" + t.name + "', got " +
                           std::to_string(count));
  }
  return Status::Ok();
}

std::string NameList(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ",'") + n + "'";
  return out;
}

}  // namespace

std::string ConfigTypeName(TRITONSERVER_DataType datatype) {
  const auto dt = static_cast<inference::DataType>(datatype);
  return inference::DataType_IsValid(dt) ? inference::DataType_Name(dt) : "TYPE_INVALID";
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

Result<int64_t> ValidateInferRequest(const inference::ModelConfig& config,
                                     const InferRequest& request) {
  const std::string& model = config.name();
  const bool batching = config.max_batch_size() > 0;
  std::set<std::string> seen;
  int64_t batch_size = -1;
  for (const Tensor& t : request.inputs) {
    if (!seen.insert(t.name).second) {
      return InvalidArgument("input '" + t.name + "' given more than once for model '" + model +
                             "'");
    }
    const inference::ModelInput* spec = nullptr;
    for (const auto& in : config.input()) {
      if (in.name() == t.name) spec = &in;
    }
    if (spec == nullptr) {
      std::vector<std::string> allowed;
      for (const auto& in : config.input()) allowed.push_back(in.name());
      return InvalidArgument("unexpected inference input '" + t.name + "' for model '" + model +
                             "'; allowed inputs are: " + NameList(allowed));
    }
    if (static_cast<int>(t.datatype) != static_cast<int>(spec->data_type())) {
      return InvalidArgument("unexpected datatype " + ConfigTypeName(t.datatype) +
                             " for inference input '" + t.name + "', expecting " +
                             inference::DataType_Name(spec->data_type()));
    }
    for (int64_t d : t.shape) {
      if (d < 0) {
        return InvalidArgument("input '" + t.name + "' has a negative dimension in shape " +
                               ShapeToString(t.shape));
      }
    }
    // Dims as the config states them, or its reshape, which Triton accepts as well.
    std::vector<std::vector<int64_t>> accepted = {
        std::vector<int64_t>(spec->dims().begin(), spec->dims().end())};
    if (spec->has_reshape()) {
      accepted.emplace_back(spec->reshape().shape().begin(), spec->reshape().shape().end());
    }
    std::vector<int64_t> item_shape = t.shape;
    if (batching) {
      if (t.shape.empty()) {
        return InvalidArgument("input '" + t.name + "' for model '" + model +
                               "' needs a batch dimension: got shape []");
      }
      const int64_t b = t.shape[0];
      if (b > config.max_batch_size()) {
        return InvalidArgument("inference request batch-size must be <= " +
                               std::to_string(config.max_batch_size()) + " for '" + model + "'");
      }
      if (batch_size >= 0 && b != batch_size) {
        return InvalidArgument("input '" + t.name + "' batch size " + std::to_string(b) +
                               " does not match other inputs' batch size " +
                               std::to_string(batch_size) + " for '" + model + "'");
      }
      batch_size = b;
      item_shape.erase(item_shape.begin());
    }
    bool shape_ok = false;
    for (const auto& dims : accepted) {
      if (dims.size() != item_shape.size()) continue;
      bool match = true;
      for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] != -1 && dims[i] != item_shape[i]) match = false;
      }
      shape_ok = shape_ok || match;
    }
    if (!shape_ok) {
      std::vector<int64_t> expected = accepted[0];
      if (batching) expected.insert(expected.begin(), -1);
      return InvalidArgument("unexpected shape for input '" + t.name + "' for model '" + model +
                             "'. Expected " + ShapeToString(expected) + ", got " +
                             ShapeToString(t.shape));
    }
    const int64_t elements = ElementCount(t.shape);
    if (t.datatype == TRITONSERVER_TYPE_BYTES) {
      RETURN_IF_ERROR(CheckBytesElements(t, elements));
    } else {
      const uint64_t expected =
          static_cast<uint64_t>(elements) * TRITONSERVER_DataTypeByteSize(t.datatype);
      if (t.data.size() != expected) {
        return InvalidArgument("unexpected total byte size " + std::to_string(t.data.size()) +
                               " for input '" + t.name + "', expecting " +
                               std::to_string(expected));
      }
    }
  }
  std::vector<std::string> missing;
  for (const auto& in : config.input()) {
    if (!in.optional() && seen.count(in.name()) == 0) missing.push_back(in.name());
  }
  if (!missing.empty()) {
    std::vector<std::string> got(seen.begin(), seen.end());
    return InvalidArgument("expected " + std::to_string(config.input_size()) + " inputs but got " +
                           std::to_string(request.inputs.size()) + " inputs for model '" + model +
                           "'. Got input(s) [" + NameList(got) +
                           "], but missing required input(s) [" + NameList(missing) +
                           "]. Please provide all required input(s).");
  }
  for (const auto& name : request.requested_outputs) {
    bool known = false;
    for (const auto& out : config.output()) known = known || out.name() == name;
    if (!known) {
      return InvalidArgument("unexpected inference output '" + name + "' for model '" + model +
                             "'");
    }
  }
  return batching ? std::max<int64_t>(batch_size, 1) : int64_t{1};
}

std::unique_ptr<InferenceRequest> BuildInferenceRequest(Model* model, InferRequest request,
                                                        std::shared_ptr<ResponseChannel> channel,
                                                        int64_t batch_size) {
  auto r = std::make_unique<InferenceRequest>(model, std::move(channel));
  r->id = std::move(request.id);
  r->batch_size = batch_size;
  for (auto& t : request.inputs) {
    RequestInput in;
    in.name = t.name;
    in.datatype = t.datatype;
    in.shape = t.shape;
    in.byte_size = t.data.size();
    auto owned = std::make_shared<const Tensor>(std::move(t));
    RequestInput::Buffer buffer;
    buffer.data = owned->data.data();
    buffer.byte_size = owned->data.size();
    buffer.attributes.byte_size = owned->data.size();
    in.buffers.push_back(buffer);
    in.tensor = std::move(owned);
    r->inputs.push_back(std::move(in));
  }
  if (request.requested_outputs.empty()) {
    for (const auto& out : model->config.output()) r->requested_outputs.push_back(out.name());
  } else {
    r->requested_outputs = std::move(request.requested_outputs);
  }
  for (auto& [key, value] : request.parameters) {
    if (key == "sequence_id") {
      if (auto* i = std::get_if<std::int64_t>(&value))
        r->correlation_id = static_cast<uint64_t>(*i);
      if (auto* s = std::get_if<std::string>(&value)) r->correlation_id_string = *s;
      continue;
    }
    if (key == "sequence_start" || key == "sequence_end") {
      const bool on = std::holds_alternative<bool>(value) && std::get<bool>(value);
      if (on) {
        r->flags |= key == "sequence_start" ? TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
                                            : TRITONSERVER_REQUEST_FLAG_SEQUENCE_END;
      }
      continue;
    }
    if (key == "timeout") {
      if (auto* i = std::get_if<std::int64_t>(&value)) r->timeout_us = static_cast<uint64_t>(*i);
      continue;
    }
    if (key == "priority") continue;
    RequestParameter p;
    p.key = key;
    std::visit(
        [&p](auto&& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) {
            p.type = TRITONSERVER_PARAMETER_STRING;
            p.string_value = v;
          } else if constexpr (std::is_same_v<V, std::int64_t>) {
            p.type = TRITONSERVER_PARAMETER_INT;
            p.int_value = v;
          } else if constexpr (std::is_same_v<V, bool>) {
            p.type = TRITONSERVER_PARAMETER_BOOL;
            p.bool_value = v;
          } else {
            p.type = TRITONSERVER_PARAMETER_DOUBLE;
            p.double_value = v;
          }
        },
        value);
    r->parameters.push_back(std::move(p));
  }
  return r;
}

}  // namespace inflight::server
