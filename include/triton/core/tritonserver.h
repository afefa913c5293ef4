// Triton server C API, version 1.34: the part that backends and Inflight use, including what a
// backend needs to call another model (BLS: TRITONSERVER_InferenceRequest*, ServerInferAsync).
//
// Written for Inflight from the published API (names, signatures, enum values and flags as Triton's
// tritonserver.h). Enum values are part of the ABI: tests/unit/triton_abi checks each one.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_MSC_VER)
#define TRITONSERVER_DECLSPEC __declspec(dllexport)
#elif defined(__GNUC__)
#define TRITONSERVER_DECLSPEC __attribute__((__visibility__("default")))
#else
#define TRITONSERVER_DECLSPEC
#endif

#define TRITONSERVER_API_VERSION_MAJOR 1
#define TRITONSERVER_API_VERSION_MINOR 34

struct TRITONSERVER_BufferAttributes;
struct TRITONSERVER_Error;
struct TRITONSERVER_InferenceRequest;
struct TRITONSERVER_InferenceResponse;
struct TRITONSERVER_InferenceTrace;
struct TRITONSERVER_Message;
struct TRITONSERVER_Metrics;
struct TRITONSERVER_Parameter;
struct TRITONSERVER_ResponseAllocator;
struct TRITONSERVER_Server;
struct TRITONSERVER_ServerOptions;
struct TRITONSERVER_Metric;
struct TRITONSERVER_MetricFamily;
struct TRITONSERVER_MetricArgs;

typedef struct TRITONSERVER_BufferAttributes TRITONSERVER_BufferAttributes;
typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;
typedef struct TRITONSERVER_Parameter TRITONSERVER_Parameter;
typedef struct TRITONSERVER_Server TRITONSERVER_Server;
typedef struct TRITONSERVER_Metric TRITONSERVER_Metric;
typedef struct TRITONSERVER_MetricFamily TRITONSERVER_MetricFamily;
typedef struct TRITONSERVER_MetricArgs TRITONSERVER_MetricArgs;

TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ApiVersion(uint32_t* major, uint32_t* minor);

// ---- Data types ----
typedef enum TRITONSERVER_datatype_enum {
  TRITONSERVER_TYPE_INVALID = 0,
  TRITONSERVER_TYPE_BOOL = 1,
  TRITONSERVER_TYPE_UINT8 = 2,
  TRITONSERVER_TYPE_UINT16 = 3,
  TRITONSERVER_TYPE_UINT32 = 4,
  TRITONSERVER_TYPE_UINT64 = 5,
  TRITONSERVER_TYPE_INT8 = 6,
  TRITONSERVER_TYPE_INT16 = 7,
  TRITONSERVER_TYPE_INT32 = 8,
  TRITONSERVER_TYPE_INT64 = 9,
  TRITONSERVER_TYPE_FP16 = 10,
  TRITONSERVER_TYPE_FP32 = 11,
  TRITONSERVER_TYPE_FP64 = 12,
  TRITONSERVER_TYPE_BYTES = 13,
  TRITONSERVER_TYPE_BF16 = 14
} TRITONSERVER_DataType;

TRITONSERVER_DECLSPEC const char* TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype);
TRITONSERVER_DECLSPEC TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char* dtype);
TRITONSERVER_DECLSPEC uint32_t TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype);

// ---- Memory ----
typedef enum TRITONSERVER_memorytype_enum {
  TRITONSERVER_MEMORY_CPU = 0,
  TRITONSERVER_MEMORY_CPU_PINNED = 1,
  TRITONSERVER_MEMORY_GPU = 2
} TRITONSERVER_MemoryType;

TRITONSERVER_DECLSPEC const char* TRITONSERVER_MemoryTypeString(TRITONSERVER_MemoryType memtype);

// ---- Parameters ----
typedef enum TRITONSERVER_parametertype_enum {
  TRITONSERVER_PARAMETER_STRING = 0,
  TRITONSERVER_PARAMETER_INT = 1,
  TRITONSERVER_PARAMETER_BOOL = 2,
  TRITONSERVER_PARAMETER_DOUBLE = 3,
  TRITONSERVER_PARAMETER_BYTES = 4
} TRITONSERVER_ParameterType;

TRITONSERVER_DECLSPEC const char* TRITONSERVER_ParameterTypeString(TRITONSERVER_ParameterType paramtype);
TRITONSERVER_DECLSPEC TRITONSERVER_Parameter* TRITONSERVER_ParameterNew(
    const char* name, const TRITONSERVER_ParameterType type, const void* value);
TRITONSERVER_DECLSPEC TRITONSERVER_Parameter* TRITONSERVER_ParameterBytesNew(
    const char* name, const void* byte_ptr, const uint64_t size);
TRITONSERVER_DECLSPEC void TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter* parameter);

// ---- Instance group kinds ----
typedef enum TRITONSERVER_instancegroupkind_enum {
  TRITONSERVER_INSTANCEGROUPKIND_AUTO = 0,
  TRITONSERVER_INSTANCEGROUPKIND_CPU = 1,
  TRITONSERVER_INSTANCEGROUPKIND_GPU = 2,
  TRITONSERVER_INSTANCEGROUPKIND_MODEL = 3
} TRITONSERVER_InstanceGroupKind;

TRITONSERVER_DECLSPEC const char* TRITONSERVER_InstanceGroupKindString(
    TRITONSERVER_InstanceGroupKind kind);

// ---- Logging ----
typedef enum TRITONSERVER_loglevel_enum {
  TRITONSERVER_LOG_INFO = 0,
  TRITONSERVER_LOG_WARN = 1,
  TRITONSERVER_LOG_ERROR = 2,
  TRITONSERVER_LOG_VERBOSE = 3
} TRITONSERVER_LogLevel;

typedef enum TRITONSERVER_logformat_enum {
  TRITONSERVER_LOG_DEFAULT = 0,
  TRITONSERVER_LOG_ISO8601 = 1
} TRITONSERVER_LogFormat;

TRITONSERVER_DECLSPEC bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_LogMessage(
    TRITONSERVER_LogLevel level, const char* filename, const int line, const char* msg);

// ---- Errors ----
typedef enum TRITONSERVER_errorcode_enum {
  TRITONSERVER_ERROR_UNKNOWN = 0,
  TRITONSERVER_ERROR_INTERNAL = 1,
  TRITONSERVER_ERROR_NOT_FOUND = 2,
  TRITONSERVER_ERROR_INVALID_ARG = 3,
  TRITONSERVER_ERROR_UNAVAILABLE = 4,
  TRITONSERVER_ERROR_UNSUPPORTED = 5,
  TRITONSERVER_ERROR_ALREADY_EXISTS = 6,
  TRITONSERVER_ERROR_CANCELLED = 7
} TRITONSERVER_Error_Code;

TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code,
                                                                const char* msg);
TRITONSERVER_DECLSPEC void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error);
TRITONSERVER_DECLSPEC TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error* error);
TRITONSERVER_DECLSPEC const char* TRITONSERVER_ErrorCodeString(TRITONSERVER_Error* error);
TRITONSERVER_DECLSPEC const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error);

// ---- Buffer attributes ----
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesNew(
    TRITONSERVER_BufferAttributes** buffer_attributes);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesDelete(
    TRITONSERVER_BufferAttributes* buffer_attributes);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetMemoryTypeId(
    TRITONSERVER_BufferAttributes* buffer_attributes, int64_t memory_type_id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetMemoryType(
    TRITONSERVER_BufferAttributes* buffer_attributes, TRITONSERVER_MemoryType memory_type);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetCudaIpcHandle(
    TRITONSERVER_BufferAttributes* buffer_attributes, void* cuda_ipc_handle);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetByteSize(
    TRITONSERVER_BufferAttributes* buffer_attributes, size_t byte_size);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesMemoryTypeId(
    TRITONSERVER_BufferAttributes* buffer_attributes, int64_t* memory_type_id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesMemoryType(
    TRITONSERVER_BufferAttributes* buffer_attributes, TRITONSERVER_MemoryType* memory_type);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesCudaIpcHandle(
    TRITONSERVER_BufferAttributes* buffer_attributes, void** cuda_ipc_handle);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesByteSize(
    TRITONSERVER_BufferAttributes* buffer_attributes, size_t* byte_size);

// ---- Messages (JSON) ----
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MessageNewFromSerializedJson(
    TRITONSERVER_Message** message, const char* base, size_t byte_size);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(
    TRITONSERVER_Message* message, const char** base, size_t* byte_size);

// ---- Request / response flags ----
typedef enum tritonserver_requestflag_enum {
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1,
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
} TRITONSERVER_RequestFlag;

typedef enum tritonserver_requestreleaseflag_enum {
  TRITONSERVER_REQUEST_RELEASE_ALL = 1,
  TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
} TRITONSERVER_RequestReleaseFlag;

typedef enum tritonserver_responsecompleteflag_enum {
  TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
} TRITONSERVER_ResponseCompleteFlag;

typedef enum tritonserver_txn_property_flag_enum {
  TRITONSERVER_TXN_ONE_TO_ONE = 1,
  TRITONSERVER_TXN_DECOUPLED = 2
} TRITONSERVER_ModelTxnPropertyFlag;

// ---- Metrics ----
typedef enum tritonserver_metricformat_enum {
  TRITONSERVER_METRIC_PROMETHEUS = 0
} TRITONSERVER_MetricFormat;

typedef enum TRITONSERVER_metrickind_enum {
  TRITONSERVER_METRIC_KIND_COUNTER = 0,
  TRITONSERVER_METRIC_KIND_GAUGE = 1,
  TRITONSERVER_METRIC_KIND_HISTOGRAM = 2
} TRITONSERVER_MetricKind;

TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricFamilyNew(
    TRITONSERVER_MetricFamily** family, const TRITONSERVER_MetricKind kind, const char* name,
    const char* description);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricFamilyDelete(
    TRITONSERVER_MetricFamily* family);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricArgsNew(TRITONSERVER_MetricArgs** args);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricArgsSetHistogram(
    TRITONSERVER_MetricArgs* args, const double* buckets, const uint64_t buckets_count);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricArgsDelete(TRITONSERVER_MetricArgs* args);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricNew(
    TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
    const TRITONSERVER_Parameter** labels, const uint64_t label_count);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricNewWithArgs(
    TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
    const TRITONSERVER_Parameter** labels, const uint64_t label_count,
    const TRITONSERVER_MetricArgs* args);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricDelete(TRITONSERVER_Metric* metric);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricValue(TRITONSERVER_Metric* metric,
                                                                   double* value);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricIncrement(TRITONSERVER_Metric* metric,
                                                                       double value);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricSet(TRITONSERVER_Metric* metric,
                                                                 double value);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricObserve(TRITONSERVER_Metric* metric,
                                                                     double value);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_GetMetricKind(TRITONSERVER_Metric* metric,
                                                                     TRITONSERVER_MetricKind* kind);


// ---- Inference requests and responses (what a backend needs for BLS: calling another model) ----
typedef struct TRITONSERVER_InferenceRequest TRITONSERVER_InferenceRequest;
typedef struct TRITONSERVER_InferenceResponse TRITONSERVER_InferenceResponse;
typedef struct TRITONSERVER_InferenceTrace TRITONSERVER_InferenceTrace;
typedef struct TRITONSERVER_ResponseAllocator TRITONSERVER_ResponseAllocator;

typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorAllocFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, const char* tensor_name, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id, void* userp, void** buffer,
    void** buffer_userp, TRITONSERVER_MemoryType* actual_memory_type,
    int64_t* actual_memory_type_id);
typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorReleaseFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, void* buffer, void* buffer_userp, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id);
typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorStartFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, void* userp);
typedef void (*TRITONSERVER_InferenceRequestReleaseFn_t)(TRITONSERVER_InferenceRequest* request,
                                                         const uint32_t flags, void* userp);
typedef void (*TRITONSERVER_InferenceResponseCompleteFn_t)(
    TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp);

TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorNew(
    TRITONSERVER_ResponseAllocator** allocator, TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
    TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,
    TRITONSERVER_ResponseAllocatorStartFn_t start_fn);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorDelete(
    TRITONSERVER_ResponseAllocator* allocator);

TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestNew(
    TRITONSERVER_InferenceRequest** inference_request, TRITONSERVER_Server* server,
    const char* model_name, const int64_t model_version);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestDelete(
    TRITONSERVER_InferenceRequest* inference_request);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestId(
    TRITONSERVER_InferenceRequest* inference_request, const char** id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetId(
    TRITONSERVER_InferenceRequest* inference_request, const char* id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestFlags(
    TRITONSERVER_InferenceRequest* inference_request, uint32_t* flags);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetFlags(
    TRITONSERVER_InferenceRequest* inference_request, uint32_t flags);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestCorrelationId(
    TRITONSERVER_InferenceRequest* inference_request, uint64_t* correlation_id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationId(
    TRITONSERVER_InferenceRequest* inference_request, uint64_t correlation_id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestPriorityUInt64(
    TRITONSERVER_InferenceRequest* inference_request, uint64_t* priority);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetPriorityUInt64(
    TRITONSERVER_InferenceRequest* inference_request, uint64_t priority);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestTimeoutMicroseconds(
    TRITONSERVER_InferenceRequest* inference_request, uint64_t* timeout_us);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
    TRITONSERVER_InferenceRequest* inference_request, uint64_t timeout_us);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddInput(
    TRITONSERVER_InferenceRequest* inference_request, const char* name,
    const TRITONSERVER_DataType datatype, const int64_t* shape, uint64_t dim_count);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveInput(
    TRITONSERVER_InferenceRequest* inference_request, const char* name);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllInputs(
    TRITONSERVER_InferenceRequest* inference_request);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputData(
    TRITONSERVER_InferenceRequest* inference_request, const char* name, const void* base,
    size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllInputData(
    TRITONSERVER_InferenceRequest* inference_request, const char* name);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddRequestedOutput(
    TRITONSERVER_InferenceRequest* inference_request, const char* name);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveRequestedOutput(
    TRITONSERVER_InferenceRequest* inference_request, const char* name);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(
    TRITONSERVER_InferenceRequest* inference_request);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetReleaseCallback(
    TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_InferenceRequestReleaseFn_t request_release_fn, void* request_release_userp);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetResponseCallback(
    TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_ResponseAllocator* response_allocator, void* response_allocator_userp,
    TRITONSERVER_InferenceResponseCompleteFn_t response_fn, void* response_userp);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestCancel(
    TRITONSERVER_InferenceRequest* inference_request);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestIsCancelled(
    TRITONSERVER_InferenceRequest* inference_request, bool* is_cancelled);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetStringParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, const char* value);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetIntParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, const int64_t value);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetBoolParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, const bool value);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetDoubleParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, const double value);

TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceResponseDelete(
    TRITONSERVER_InferenceResponse* inference_response);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceResponseError(
    TRITONSERVER_InferenceResponse* inference_response);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceResponseModel(
    TRITONSERVER_InferenceResponse* inference_response, const char** model_name,
    int64_t* model_version);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceResponseId(
    TRITONSERVER_InferenceResponse* inference_response, const char** request_id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameterCount(
    TRITONSERVER_InferenceResponse* inference_response, uint32_t* count);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameter(
    TRITONSERVER_InferenceResponse* inference_response, const uint32_t index, const char** name,
    TRITONSERVER_ParameterType* type, const void** vvalue);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutputCount(
    TRITONSERVER_InferenceResponse* inference_response, uint32_t* count);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutput(
    TRITONSERVER_InferenceResponse* inference_response, const uint32_t index, const char** name,
    TRITONSERVER_DataType* datatype, const int64_t** shape, uint64_t* dim_count,
    const void** base, size_t* byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id, void** userp);

TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ServerInferAsync(
    TRITONSERVER_Server* server, TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_InferenceTrace* trace);

#ifdef __cplusplus
}
#endif
