#include "e2e/fake_server.h"

#include <chrono>
#include <cstring>

namespace inflight::server::testing {
namespace {

class FakeRequest : public InflightRequest {
 public:
  void Cancel() override { cancelled = true; }
  std::atomic<bool> cancelled{false};
};

const Tensor* FindInput(const InferRequest& request, const std::string& name) {
  for (const Tensor& t : request.inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::int32_t ScalarInt(const InferRequest& request, const std::string& name,
                       std::int32_t fallback) {
  const Tensor* t = FindInput(request, name);
  if (t == nullptr || t->data.size() < 4) return fallback;
  std::int32_t v;
  std::memcpy(&v, t->data.data(), 4);
  return v;
}

Tensor Renamed(const Tensor& input, const std::string& name) {
  Tensor out = input;
  out.name = name;
  return out;
}

}  // namespace

FakeServer::~FakeServer() {
  Shutdown();
}

bool FakeServer::ModelIsReady(const std::string& name, std::int64_t version) const {
  return (name == "echo" || name == "stream" || name == "full") && (version == -1 || version == 1);
}

std::vector<ModelIndexEntry> FakeServer::ModelIndex() const {
  return {{"echo", "1", "READY", ""},
          {"full", "1", "READY", ""},
          {"stream", "1", "READY", ""},
          {"broken", "", "UNAVAILABLE", "load failed on purpose"}};
}

Result<ModelMetadata> FakeServer::GetModelMetadata(const std::string& name,
                                                   std::int64_t version) const {
  if (!ModelIsReady(name, version))
    return NotFound("Request for unknown model: '" + name + "' is not found");
  ModelMetadata m;
  m.name = name;
  m.versions = {"1"};
  m.platform = "fake";
  if (name == "stream") {
    m.inputs = {{"COUNT", TRITONSERVER_TYPE_INT32, {-1, 1}, false},
                {"DELAY_MS", TRITONSERVER_TYPE_INT32, {-1, 1}, true},
                {"FAIL_AT", TRITONSERVER_TYPE_INT32, {-1, 1}, true}};
    m.outputs = {{"INDEX", TRITONSERVER_TYPE_INT32, {-1, 1}, false}};
  } else {
    m.inputs = {{"INPUT0", TRITONSERVER_TYPE_INT32, {-1}, false},
                {"TEXT", TRITONSERVER_TYPE_BYTES, {-1}, true},
                {"F16_IN", TRITONSERVER_TYPE_FP16, {-1}, true}};
    m.outputs = {{"OUTPUT0", TRITONSERVER_TYPE_INT32, {-1}, false},
                 {"TEXT_OUT", TRITONSERVER_TYPE_BYTES, {-1}, false},
                 {"F16_OUT", TRITONSERVER_TYPE_FP16, {-1}, false}};
  }
  return m;
}

Result<std::string> FakeServer::GetModelConfigJson(const std::string& name,
                                                   std::int64_t version) const {
  ASSIGN_OR_RETURN(std::int64_t max_batch_size, ModelMaxBatchSize(name, version));
  return std::string(R"({"name":")") + name + R"(","max_batch_size":)" +
         std::to_string(max_batch_size) + "}";
}

Result<bool> FakeServer::ModelIsDecoupled(const std::string& name, std::int64_t version) const {
  if (!ModelIsReady(name, version))
    return NotFound("Request for unknown model: '" + name + "' is not found");
  return name == "stream";
}

Result<std::int64_t> FakeServer::ModelMaxBatchSize(const std::string& name,
                                                   std::int64_t version) const {
  if (!ModelIsReady(name, version))
    return NotFound("Request for unknown model: '" + name + "' is not found");
  return name == "stream" ? 4 : 0;
}

InferRequest FakeServer::last_request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_request_;
}

Result<std::shared_ptr<InflightRequest>> FakeServer::Infer(InferRequest request,
                                                           ResponseCallback callback) {
  if (!ModelIsReady(request.model_name, request.model_version)) {
    return NotFound("Request for unknown model: '" + request.model_name + "' is not found");
  }
  if (request.model_name == "full") {
    return Unavailable("Exceeds maximum queue size");
  }
  auto handle = std::make_shared<FakeRequest>();
  std::lock_guard<std::mutex> lock(mu_);
  last_request_ = request;
  workers_.emplace_back(
      [this, handle, request = std::move(request), callback = std::move(callback)] {
        InferResponse base;
        base.model_name = request.model_name;
        base.model_version = 1;
        base.id = request.id;
        if (request.model_name == "echo") {
          // DELAY_MS (optional) holds the answer back, in 10 ms steps that watch for a cancel.
          for (int waited = 0; waited < ScalarInt(request, "DELAY_MS", 0); waited += 10) {
            if (handle->cancelled) {
              ++cancelled_;
              InferResponse r = base;
              r.error = Cancelled("request cancelled");
              callback(std::move(r));
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          InferResponse r = base;
          r.is_final = true;
          r.parameters = request.parameters;
          static const std::pair<const char*, const char*> kPairs[] = {
              {"INPUT0", "OUTPUT0"}, {"TEXT", "TEXT_OUT"}, {"F16_IN", "F16_OUT"}};
          for (const auto& [in, out] : kPairs) {
            if (const Tensor* t = FindInput(request, in)) r.outputs.push_back(Renamed(*t, out));
          }
          ++finished_;
          callback(std::move(r));
          return;
        }
        const int count = ScalarInt(request, "COUNT", 1);
        const int delay_ms = ScalarInt(request, "DELAY_MS", 0);
        const int fail_at = ScalarInt(request, "FAIL_AT", -1);
        for (int i = 0; i < count; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
          if (handle->cancelled) {
            ++cancelled_;
            InferResponse r = base;
            r.error = Cancelled("request cancelled");
            callback(std::move(r));
            return;
          }
          InferResponse r = base;
          if (i == fail_at) {
            r.error = InvalidArgument("failing at index " + std::to_string(i) + " as asked");
            callback(std::move(r));
            return;
          }
          Tensor index{"INDEX", TRITONSERVER_TYPE_INT32, {1, 1}, std::vector<char>(4)};
          std::memcpy(index.data.data(), &i, 4);
          r.outputs.push_back(std::move(index));
          callback(std::move(r));
        }
        InferResponse final_flag = base;
        final_flag.is_final = true;
        ++finished_;
        callback(std::move(final_flag));
      });
  return std::shared_ptr<InflightRequest>(handle);
}

std::string FakeServer::MetricsText() const {
  return "# HELP nv_inference_request_success Number of successful inference requests\n"
         "# TYPE nv_inference_request_success counter\n"
         "nv_inference_request_success{model=\"echo\",version=\"1\"} " +
         std::to_string(finished_.load()) + "\n";
}

Result<std::string> FakeServer::ModelStatisticsJson(const std::string& name) const {
  if (!name.empty() && !ModelIsReady(name, -1)) return NotFound("unknown model: '" + name + "'");
  return std::string(R"({"model_stats":[{"name":")") + name + R"("}]})";
}

void FakeServer::Shutdown() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
}

}  // namespace inflight::server::testing
