// TRITONSERVER_* basics: versions, errors, messages, logging, data types, parameters, buffer
// attributes.
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "server/c_api_objects.h"

namespace inflight::server {

TRITONSERVER_Error* ToTritonError(const Status& status) {
  if (status.ok()) return nullptr;
  return new TRITONSERVER_Error{ToTritonCode(status.code()), status.message()};
}

Status FromTritonError(const TRITONSERVER_Error* error) {
  if (error == nullptr) return Status::Ok();
  StatusCode code = FromTritonCode(error->code);
  // NOTE: an error object with code UNKNOWN is still an error; Status needs a non-ok code for that.
  return Status(code == StatusCode::kOk ? StatusCode::kUnknown : code, error->message);
}

Status TakeTritonError(TRITONSERVER_Error* error) {
  Status status = FromTritonError(error);
  delete error;
  return status;
}

}  // namespace inflight::server

namespace {

const char* const kDataTypeNames[] = {"<invalid>", "BOOL", "UINT8", "UINT16", "UINT32",
                                      "UINT64",    "INT8", "INT16", "INT32",  "INT64",
                                      "FP16",      "FP32", "FP64",  "BYTES",  "BF16"};
const uint32_t kDataTypeSizes[] = {0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 0, 2};

TRITONSERVER_Error* Invalid(const std::string& msg) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg.c_str());
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONSERVER_ApiVersion(uint32_t* major, uint32_t* minor) {
  INFLIGHT_API_REQUIRE(major);
  INFLIGHT_API_REQUIRE(minor);
  *major = TRITONSERVER_API_VERSION_MAJOR;
  *minor = TRITONSERVER_API_VERSION_MINOR;
  return nullptr;
}

const char* TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype) {
  const auto i = static_cast<unsigned>(datatype);
  return i < std::size(kDataTypeNames) ? kDataTypeNames[i] : kDataTypeNames[0];
}

TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char* dtype) {
  if (dtype == nullptr) return TRITONSERVER_TYPE_INVALID;
  for (unsigned i = 1; i < std::size(kDataTypeNames); ++i) {
    if (std::strcmp(dtype, kDataTypeNames[i]) == 0) return static_cast<TRITONSERVER_DataType>(i);
  }
  return TRITONSERVER_TYPE_INVALID;
}

uint32_t TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype) {
  const auto i = static_cast<unsigned>(datatype);
  return i < std::size(kDataTypeSizes) ? kDataTypeSizes[i] : 0;
}

const char* TRITONSERVER_MemoryTypeString(TRITONSERVER_MemoryType memtype) {
  switch (memtype) {
    case TRITONSERVER_MEMORY_CPU:
      return "CPU";
    case TRITONSERVER_MEMORY_CPU_PINNED:
      return "CPU_PINNED";
    case TRITONSERVER_MEMORY_GPU:
      return "GPU";
  }
  return "<invalid>";
}

const char* TRITONSERVER_ParameterTypeString(TRITONSERVER_ParameterType paramtype) {
  switch (paramtype) {
    case TRITONSERVER_PARAMETER_STRING:
      return "STRING";
    case TRITONSERVER_PARAMETER_INT:
      return "INT";
    case TRITONSERVER_PARAMETER_BOOL:
      return "BOOL";
    case TRITONSERVER_PARAMETER_DOUBLE:
      return "DOUBLE";
    case TRITONSERVER_PARAMETER_BYTES:
      return "BYTES";
  }
  return "<invalid>";
}

const char* TRITONSERVER_InstanceGroupKindString(TRITONSERVER_InstanceGroupKind kind) {
  switch (kind) {
    case TRITONSERVER_INSTANCEGROUPKIND_AUTO:
      return "AUTO";
    case TRITONSERVER_INSTANCEGROUPKIND_CPU:
      return "CPU";
    case TRITONSERVER_INSTANCEGROUPKIND_GPU:
      return "GPU";
    case TRITONSERVER_INSTANCEGROUPKIND_MODEL:
      return "MODEL";
  }
  return "<invalid>";
}

TRITONSERVER_Parameter* TRITONSERVER_ParameterNew(const char* name,
                                                  const TRITONSERVER_ParameterType type,
                                                  const void* value) {
  if (name == nullptr || value == nullptr) return nullptr;
  auto* p = new TRITONSERVER_Parameter{};
  p->name = name;
  p->type = type;
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING:
      p->string_value = static_cast<const char*>(value);
      break;
    case TRITONSERVER_PARAMETER_INT:
      p->int_value = *static_cast<const int64_t*>(value);
      break;
    case TRITONSERVER_PARAMETER_BOOL:
      p->bool_value = *static_cast<const bool*>(value);
      break;
    case TRITONSERVER_PARAMETER_DOUBLE:
      p->double_value = *static_cast<const double*>(value);
      break;
    case TRITONSERVER_PARAMETER_BYTES:
      // Bytes need a size: TRITONSERVER_ParameterBytesNew is the constructor for them (as in
      // Triton).
      delete p;
      return nullptr;
  }
  return p;
}

TRITONSERVER_Parameter* TRITONSERVER_ParameterBytesNew(const char* name, const void* byte_ptr,
                                                       const uint64_t size) {
  if (name == nullptr || (byte_ptr == nullptr && size > 0)) return nullptr;
  auto* p = new TRITONSERVER_Parameter{};
  p->name = name;
  p->type = TRITONSERVER_PARAMETER_BYTES;
  p->string_value.assign(static_cast<const char*>(byte_ptr), size);
  return p;
}

void TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter* parameter) {
  delete parameter;
}

namespace {
// The level as the caller passed it. NOTE: a backend may pass a value outside the enum (a newer
// level, a bug); loading such a value as the enum is undefined behaviour (UBSan flags it), so its
// bytes are read as the int they are on this ABI.
int RawLogLevel(const TRITONSERVER_LogLevel& level) {
  static_assert(sizeof(TRITONSERVER_LogLevel) == sizeof(int));
  int raw = 0;
  std::memcpy(&raw, &level, sizeof(raw));
  return raw;
}
}  // namespace

bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level) {
  switch (RawLogLevel(level)) {
    case TRITONSERVER_LOG_INFO:
      return spdlog::should_log(spdlog::level::info);
    case TRITONSERVER_LOG_WARN:
      return spdlog::should_log(spdlog::level::warn);
    case TRITONSERVER_LOG_ERROR:
      return spdlog::should_log(spdlog::level::err);
    case TRITONSERVER_LOG_VERBOSE:
      return spdlog::should_log(spdlog::level::debug);
  }
  return false;
}

TRITONSERVER_Error* TRITONSERVER_LogMessage(TRITONSERVER_LogLevel level, const char* filename,
                                            const int line, const char* msg) {
  spdlog::level::level_enum spd = spdlog::level::info;
  const int raw = RawLogLevel(level);
  switch (raw) {
    case TRITONSERVER_LOG_INFO:
      spd = spdlog::level::info;
      break;
    case TRITONSERVER_LOG_WARN:
      spd = spdlog::level::warn;
      break;
    case TRITONSERVER_LOG_ERROR:
      spd = spdlog::level::err;
      break;
    case TRITONSERVER_LOG_VERBOSE:
      spd = spdlog::level::debug;
      break;
    default:
      return Invalid("TRITONSERVER_LogMessage: unknown log level " + std::to_string(raw));
  }
  const char* base = filename == nullptr ? "" : filename;
  if (const char* slash = std::strrchr(base, '/')) base = slash + 1;
  spdlog::log(spd, "{}:{}] {}", base, line, msg == nullptr ? "" : msg);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg) {
  return new TRITONSERVER_Error{code, msg == nullptr ? "" : msg};
}

void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error) {
  delete error;
}

TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error* error) {
  return error == nullptr ? TRITONSERVER_ERROR_UNKNOWN : error->code;
}

const char* TRITONSERVER_ErrorCodeString(TRITONSERVER_Error* error) {
  if (error == nullptr) return "<invalid code>";
  // The strings of Triton's Status::CodeString.
  switch (error->code) {
    case TRITONSERVER_ERROR_UNKNOWN:
      return "Unknown";
    case TRITONSERVER_ERROR_INTERNAL:
      return "Internal";
    case TRITONSERVER_ERROR_NOT_FOUND:
      return "Not found";
    case TRITONSERVER_ERROR_INVALID_ARG:
      return "Invalid argument";
    case TRITONSERVER_ERROR_UNAVAILABLE:
      return "Unavailable";
    case TRITONSERVER_ERROR_UNSUPPORTED:
      return "Unsupported";
    case TRITONSERVER_ERROR_ALREADY_EXISTS:
      return "Already exists";
    case TRITONSERVER_ERROR_CANCELLED:
      return "Cancelled";
  }
  return "<invalid code>";
}

const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error) {
  return error == nullptr ? "" : error->message.c_str();
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesNew(
    TRITONSERVER_BufferAttributes** buffer_attributes) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  *buffer_attributes = new TRITONSERVER_BufferAttributes{};
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesDelete(
    TRITONSERVER_BufferAttributes* buffer_attributes) {
  delete buffer_attributes;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetMemoryTypeId(
    TRITONSERVER_BufferAttributes* buffer_attributes, int64_t memory_type_id) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  buffer_attributes->memory_type_id = memory_type_id;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetMemoryType(
    TRITONSERVER_BufferAttributes* buffer_attributes, TRITONSERVER_MemoryType memory_type) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  buffer_attributes->memory_type = memory_type;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetCudaIpcHandle(
    TRITONSERVER_BufferAttributes* buffer_attributes, void* cuda_ipc_handle) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  buffer_attributes->cuda_ipc_handle = cuda_ipc_handle;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetByteSize(
    TRITONSERVER_BufferAttributes* buffer_attributes, size_t byte_size) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  buffer_attributes->byte_size = byte_size;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesMemoryTypeId(
    TRITONSERVER_BufferAttributes* buffer_attributes, int64_t* memory_type_id) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  INFLIGHT_API_REQUIRE(memory_type_id);
  *memory_type_id = buffer_attributes->memory_type_id;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesMemoryType(
    TRITONSERVER_BufferAttributes* buffer_attributes, TRITONSERVER_MemoryType* memory_type) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  INFLIGHT_API_REQUIRE(memory_type);
  *memory_type = buffer_attributes->memory_type;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesCudaIpcHandle(
    TRITONSERVER_BufferAttributes* buffer_attributes, void** cuda_ipc_handle) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  INFLIGHT_API_REQUIRE(cuda_ipc_handle);
  *cuda_ipc_handle = buffer_attributes->cuda_ipc_handle;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_BufferAttributesByteSize(
    TRITONSERVER_BufferAttributes* buffer_attributes, size_t* byte_size) {
  INFLIGHT_API_REQUIRE(buffer_attributes);
  INFLIGHT_API_REQUIRE(byte_size);
  *byte_size = buffer_attributes->byte_size;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MessageNewFromSerializedJson(TRITONSERVER_Message** message,
                                                              const char* base, size_t byte_size) {
  INFLIGHT_API_REQUIRE(message);
  if (base == nullptr && byte_size > 0)
    return Invalid("TRITONSERVER_MessageNewFromSerializedJson: null base");
  std::string json(base == nullptr ? "" : base, byte_size);
  if (!nlohmann::json::accept(json)) {
    return Invalid("TRITONSERVER_MessageNewFromSerializedJson: the " + std::to_string(byte_size) +
                   " bytes given are not valid JSON");
  }
  *message = new TRITONSERVER_Message{std::move(json)};
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message) {
  delete message;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message* message,
                                                        const char** base, size_t* byte_size) {
  INFLIGHT_API_REQUIRE(message);
  INFLIGHT_API_REQUIRE(base);
  INFLIGHT_API_REQUIRE(byte_size);
  *base = message->json.c_str();
  *byte_size = message->json.size();
  return nullptr;
}

}  // extern "C"
