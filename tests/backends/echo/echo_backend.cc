// A test backend written only against Triton's C API. Its behaviour comes from the model config's
// parameters:
//   mode          "echo" (default): one response per request, every input X copied to output
//                 <output_prefix>X (or to the name output_map gives it).
//                 "stream": decoupled; `count` responses (input "count" INT32, else the parameter),
//                 each the echo plus output INDEX (INT32 [1]), `delay_ms` apart; stops early when
//                 the request is cancelled; then FINAL with no response.
//   output_prefix default "OUT_";  output_map "IN_A:OUT_X,IN_B:OUT_Y"
//   delay_ms      sleep per Execute (echo) or per response (stream)
//   execute_error "true": Execute itself fails (the core answers the requests)
//   report_batch  "true": adds output BATCH_REQUESTS (INT32 [1]) = requests in this Execute
// Control inputs, never echoed: "count"; "fail" (any value) → an error response; "hang" → the
// request is released and its response factory kept, unanswered, until ModelFinalize (tests the
// core's shutdown path); "drop" → the request is released with no response and no factory.
// Metrics (shared by every model of this backend, label model=<name>): echo_requests_total
// (counter), echo_inflight_requests (gauge), echo_response_count (histogram).
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "triton/core/tritonbackend.h"

namespace {

#define ECHO_RETURN_IF_ERROR(expr)   \
  do {                               \
    TRITONSERVER_Error* _e = (expr); \
    if (_e != nullptr) return _e;    \
  } while (0)

TRITONSERVER_Error* Error(TRITONSERVER_Error_Code code, const std::string& msg) {
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

struct Metrics {
  TRITONSERVER_MetricFamily* requests_family = nullptr;
  TRITONSERVER_MetricFamily* inflight_family = nullptr;
  TRITONSERVER_MetricFamily* responses_family = nullptr;
  TRITONSERVER_Metric* requests = nullptr;
  TRITONSERVER_Metric* inflight = nullptr;
  TRITONSERVER_Metric* responses = nullptr;
};

struct ModelState {
  std::string name;
  bool stream = false;
  std::string output_prefix = "OUT_";
  std::map<std::string, std::string> output_map;
  int delay_ms = 0;
  int count = 1;
  bool execute_error = false;
  bool report_batch = false;
  Metrics metrics;
  std::vector<TRITONBACKEND_ResponseFactory*> hung;  // only the instance thread touches it
};

std::string Param(const nlohmann::json& config, const std::string& key, const std::string& dflt) {
  auto params = config.find("parameters");
  if (params == config.end() || !params->contains(key)) return dflt;
  return (*params)[key].value("string_value", dflt);
}

TRITONSERVER_Error* CreateMetrics(ModelState* state) {
  Metrics& m = state->metrics;
  ECHO_RETURN_IF_ERROR(TRITONSERVER_MetricFamilyNew(&m.requests_family,
                                                    TRITONSERVER_METRIC_KIND_COUNTER,
                                                    "echo_requests_total", "Requests executed"));
  ECHO_RETURN_IF_ERROR(TRITONSERVER_MetricFamilyNew(&m.inflight_family,
                                                    TRITONSERVER_METRIC_KIND_GAUGE,
                                                    "echo_inflight_requests", "Requests running"));
  ECHO_RETURN_IF_ERROR(
      TRITONSERVER_MetricFamilyNew(&m.responses_family, TRITONSERVER_METRIC_KIND_HISTOGRAM,
                                   "echo_response_count", "Responses per request"));
  TRITONSERVER_Parameter* label =
      TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, state->name.c_str());
  const TRITONSERVER_Parameter* labels[] = {label};
  TRITONSERVER_Error* err = TRITONSERVER_MetricNew(&m.requests, m.requests_family, labels, 1);
  if (err == nullptr) err = TRITONSERVER_MetricNew(&m.inflight, m.inflight_family, labels, 1);
  if (err == nullptr) {
    TRITONSERVER_MetricArgs* args = nullptr;
    const double buckets[] = {1, 2, 5, 10};
    err = TRITONSERVER_MetricArgsNew(&args);
    if (err == nullptr) err = TRITONSERVER_MetricArgsSetHistogram(args, buckets, 4);
    if (err == nullptr) {
      err = TRITONSERVER_MetricNewWithArgs(&m.responses, m.responses_family, labels, 1, args);
    }
    TRITONSERVER_MetricArgsDelete(args);
  }
  TRITONSERVER_ParameterDelete(label);
  return err;
}

void DeleteMetrics(Metrics& m) {
  for (TRITONSERVER_Metric* metric : {m.requests, m.inflight, m.responses}) {
    if (metric != nullptr) TRITONSERVER_MetricDelete(metric);
  }
  for (TRITONSERVER_MetricFamily* f : {m.requests_family, m.inflight_family, m.responses_family}) {
    if (f != nullptr) TRITONSERVER_MetricFamilyDelete(f);
  }
}

std::string OutputName(const ModelState& state, const std::string& input) {
  auto it = state.output_map.find(input);
  return it != state.output_map.end() ? it->second : state.output_prefix + input;
}

bool IsControlInput(const std::string& name) {
  return name == "count" || name == "fail" || name == "hang" || name == "drop";
}

TRITONSERVER_Error* AddOutput(TRITONBACKEND_Response* response, const std::string& name,
                              TRITONSERVER_DataType dtype, const int64_t* shape, uint32_t dims,
                              const void* data, uint64_t byte_size) {
  TRITONBACKEND_Output* output = nullptr;
  ECHO_RETURN_IF_ERROR(
      TRITONBACKEND_ResponseOutput(response, &output, name.c_str(), dtype, shape, dims));
  void* buffer = nullptr;
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(output, &buffer, byte_size, &mem, &mem_id));
  if (mem != TRITONSERVER_MEMORY_CPU && mem != TRITONSERVER_MEMORY_CPU_PINNED) {
    return Error(TRITONSERVER_ERROR_UNSUPPORTED, "echo: output buffer not in CPU memory");
  }
  if (byte_size > 0) std::memcpy(buffer, data, byte_size);
  return nullptr;
}

// Copies every non-control input (all of its buffers) into `response`.
TRITONSERVER_Error* EchoInputs(const ModelState& state, TRITONBACKEND_Request* request,
                               TRITONBACKEND_Response* response) {
  uint32_t count = 0;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_RequestInputCount(request, &count));
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    ECHO_RETURN_IF_ERROR(TRITONBACKEND_RequestInputByIndex(request, i, &input));
    const char* name = nullptr;
    TRITONSERVER_DataType dtype;
    const int64_t* shape = nullptr;
    uint32_t dims = 0, buffers = 0;
    uint64_t byte_size = 0;
    ECHO_RETURN_IF_ERROR(
        TRITONBACKEND_InputProperties(input, &name, &dtype, &shape, &dims, &byte_size, &buffers));
    if (IsControlInput(name)) continue;
    std::vector<char> data;
    data.reserve(byte_size);
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* buf = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mem;
      int64_t mem_id;
      ECHO_RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, b, &buf, &size, &mem, &mem_id));
      data.insert(data.end(), static_cast<const char*>(buf), static_cast<const char*>(buf) + size);
    }
    ECHO_RETURN_IF_ERROR(
        AddOutput(response, OutputName(state, name), dtype, shape, dims, data.data(), data.size()));
  }
  return nullptr;
}

bool HasInput(TRITONBACKEND_Request* request, const char* name) {
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, name, &input);
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  return input != nullptr;
}

int StreamCount(const ModelState& state, TRITONBACKEND_Request* request) {
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, "count", &input);
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    return state.count;
  }
  const void* buf = nullptr;
  uint64_t size = 0;
  TRITONSERVER_MemoryType mem;
  int64_t mem_id;
  err = TRITONBACKEND_InputBuffer(input, 0, &buf, &size, &mem, &mem_id);
  if (err != nullptr || size < 4) {
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    return state.count;
  }
  int32_t n = 0;
  std::memcpy(&n, buf, 4);
  return n;
}

void LogIfError(TRITONSERVER_Error* err, const char* what) {
  if (err == nullptr) return;
  std::string msg = std::string("echo: ") + what + ": " + TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, msg.c_str());
  TRITONSERVER_ErrorDelete(err);
}

// Answers one request completely; returns whether it succeeded (for statistics).
bool Handle(ModelState& state, TRITONBACKEND_Request* request, uint32_t batch_requests) {
  if (HasInput(request, "fail")) {
    TRITONBACKEND_Response* response = nullptr;
    LogIfError(TRITONBACKEND_ResponseNew(&response, request), "ResponseNew");
    TRITONSERVER_Error* err =
        Error(TRITONSERVER_ERROR_INVALID_ARG, "echo: the request asked to fail (input 'fail')");
    LogIfError(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
               "ResponseSend");
    TRITONSERVER_ErrorDelete(err);  // ResponseSend does not take the error
    return false;
  }
  if (!state.stream) {
    TRITONBACKEND_Response* response = nullptr;
    LogIfError(TRITONBACKEND_ResponseNew(&response, request), "ResponseNew");
    TRITONSERVER_Error* err = EchoInputs(state, request, response);
    if (err == nullptr && state.report_batch) {
      const int32_t n = static_cast<int32_t>(batch_requests);
      const int64_t shape[] = {1};
      err = AddOutput(response, "BATCH_REQUESTS", TRITONSERVER_TYPE_INT32, shape, 1, &n, 4);
    }
    LogIfError(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
               "ResponseSend");
    const bool ok = err == nullptr;
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    if (ok) TRITONSERVER_MetricObserve(state.metrics.responses, 1);
    return ok;
  }
  TRITONBACKEND_ResponseFactory* factory = nullptr;
  LogIfError(TRITONBACKEND_ResponseFactoryNew(&factory, request), "ResponseFactoryNew");
  const int n = StreamCount(state, request);
  int sent = 0;
  for (int i = 0; i < n; ++i) {
    bool cancelled = false;
    LogIfError(TRITONBACKEND_ResponseFactoryIsCancelled(factory, &cancelled), "IsCancelled");
    bool request_cancelled = false;
    LogIfError(TRITONBACKEND_RequestIsCancelled(request, &request_cancelled), "RequestIsCancelled");
    if (cancelled || request_cancelled) break;
    if (state.delay_ms > 0 && i > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(state.delay_ms));
    }
    TRITONBACKEND_Response* response = nullptr;
    LogIfError(TRITONBACKEND_ResponseNewFromFactory(&response, factory), "ResponseNewFromFactory");
    TRITONSERVER_Error* err = EchoInputs(state, request, response);
    if (err == nullptr) {
      const int32_t index = i;
      const int64_t shape[] = {1};
      err = AddOutput(response, "INDEX", TRITONSERVER_TYPE_INT32, shape, 1, &index, 4);
    }
    LogIfError(TRITONBACKEND_ResponseSend(response, 0, err), "ResponseSend");
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    ++sent;
  }
  LogIfError(TRITONBACKEND_ResponseFactorySendFlags(factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL),
             "SendFlags");
  LogIfError(TRITONBACKEND_ResponseFactoryDelete(factory), "ResponseFactoryDelete");
  TRITONSERVER_MetricObserve(state.metrics.responses, sent);
  return true;
}

}  // namespace

extern "C" {

TRITONBACKEND_DECLSPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(
    TRITONBACKEND_Backend* backend) {
  uint32_t major = 0, minor = 0;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
    return Error(TRITONSERVER_ERROR_UNSUPPORTED, "echo: triton backend API version mismatch");
  }
  TRITONSERVER_Message* config = nullptr;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_BackendConfig(backend, &config));
  const char* json = nullptr;
  size_t size = 0;
  ECHO_RETURN_IF_ERROR(TRITONSERVER_MessageSerializeToJson(config, &json, &size));
  auto parsed = nlohmann::json::parse(std::string(json, size), nullptr, false);
  if (parsed.is_discarded() || !parsed.contains("cmdline")) {
    return Error(TRITONSERVER_ERROR_INVALID_ARG, "echo: backend config lacks 'cmdline'");
  }
  // A --backend-config=inflight_test_echo,fail-init=true makes initialization fail (a test hook).
  if (parsed["cmdline"].value("fail-init", "") == "true") {
    return Error(TRITONSERVER_ERROR_INTERNAL, "echo: asked to fail initialization");
  }
  return nullptr;
}

TRITONBACKEND_DECLSPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  return nullptr;
}

TRITONBACKEND_DECLSPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(
    TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* message = nullptr;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &message));
  const char* json = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(message, &json, &size);
  nlohmann::json config;
  if (err == nullptr) config = nlohmann::json::parse(std::string(json, size), nullptr, false);
  TRITONSERVER_MessageDelete(message);
  if (err != nullptr) return err;
  if (config.is_discarded())
    return Error(TRITONSERVER_ERROR_INTERNAL, "echo: bad model config JSON");

  auto state = std::make_unique<ModelState>();
  state->name = config.value("name", "");
  state->stream = Param(config, "mode", "echo") == "stream";
  const bool decoupled = config.contains("model_transaction_policy") &&
                         config["model_transaction_policy"].value("decoupled", false);
  if (state->stream && !decoupled) {
    return Error(TRITONSERVER_ERROR_INVALID_ARG,
                 "echo: mode 'stream' needs model_transaction_policy { decoupled: true }");
  }
  state->output_prefix = Param(config, "output_prefix", "OUT_");
  const std::string map = Param(config, "output_map", "");
  for (size_t pos = 0; pos < map.size();) {
    size_t end = map.find(',', pos);
    if (end == std::string::npos) end = map.size();
    const std::string item = map.substr(pos, end - pos);
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      return Error(TRITONSERVER_ERROR_INVALID_ARG,
                   "echo: output_map item '" + item + "' is not IN:OUT");
    }
    state->output_map[item.substr(0, colon)] = item.substr(colon + 1);
    pos = end + 1;
  }
  state->delay_ms = std::stoi(Param(config, "delay_ms", "0"));
  state->count = std::stoi(Param(config, "count", "1"));
  state->execute_error = Param(config, "execute_error", "false") == "true";
  state->report_batch = Param(config, "report_batch", "false") == "true";
  ECHO_RETURN_IF_ERROR(CreateMetrics(state.get()));
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_ModelSetState(model, state.release()));
  return nullptr;
}

TRITONBACKEND_DECLSPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* vstate = nullptr;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &vstate));
  auto* state = static_cast<ModelState*>(vstate);
  DeleteMetrics(state->metrics);
  for (TRITONBACKEND_ResponseFactory* f : state->hung) TRITONBACKEND_ResponseFactoryDelete(f);
  delete state;
  return nullptr;
}

TRITONBACKEND_DECLSPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  TRITONBACKEND_Model* model = nullptr;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  return TRITONBACKEND_ModelInstanceSetState(instance, model);
}

TRITONBACKEND_DECLSPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance*) {
  return nullptr;
}

TRITONBACKEND_DECLSPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  TRITONBACKEND_Model* model = nullptr;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  void* vstate = nullptr;
  ECHO_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &vstate));
  auto& state = *static_cast<ModelState*>(vstate);
  if (state.execute_error) {
    return Error(TRITONSERVER_ERROR_INTERNAL, "echo: execute_error is set for this model");
  }
  TRITONSERVER_MetricIncrement(state.metrics.inflight, request_count);
  const uint64_t exec_start = NowNs();
  if (!state.stream && state.delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(state.delay_ms));
  }
  const uint64_t compute_start = NowNs();
  // Copy the pointers: the array stays the core's.
  std::vector<TRITONBACKEND_Request*> mine(requests, requests + request_count);
  for (TRITONBACKEND_Request* request : mine) {
    TRITONSERVER_MetricIncrement(state.metrics.requests, 1);
    if (HasInput(request, "hang")) {
      TRITONBACKEND_ResponseFactory* factory = nullptr;
      LogIfError(TRITONBACKEND_ResponseFactoryNew(&factory, request), "ResponseFactoryNew");
      if (factory != nullptr) state.hung.push_back(factory);
    }
    if (HasInput(request, "hang") || HasInput(request, "drop")) {
      LogIfError(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL),
                 "Release");
      continue;
    }
    const uint64_t request_start = NowNs();
    const bool ok = Handle(state, request, request_count);
    const uint64_t request_end = NowNs();
    LogIfError(TRITONBACKEND_ModelInstanceReportStatistics(instance, request, ok, exec_start,
                                                           request_start, request_end, request_end),
               "ReportStatistics");
    LogIfError(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL), "Release");
  }
  const uint64_t exec_end = NowNs();
  LogIfError(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, request_count, exec_start,
                                                              compute_start, exec_end, exec_end),
             "ReportBatchStatistics");
  TRITONSERVER_MetricIncrement(state.metrics.inflight, -static_cast<double>(request_count));
  return nullptr;
}

}  // extern "C"
