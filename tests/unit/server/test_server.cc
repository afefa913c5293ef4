#include "test_server.h"

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

namespace inflight::server::testing {

namespace {

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

}  // namespace

ServerOptions TestOptions() {
  ServerOptions options;
  options.model_repositories = {EnvOr("INFLIGHT_SOURCE_DIR", INFLIGHT_TEST_SOURCE_DIR) +
                                "/tests/backends/models"};
  options.backend_directory =
      EnvOr("INFLIGHT_BINARY_DIR", INFLIGHT_TEST_BINARY_DIR) + std::string("/tests/backends");
  options.exit_timeout_secs = 2.0;
  return options;
}

std::unique_ptr<Server> MakeServer(const ServerOptions& options) {
  auto server = Server::Create(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

Tensor Int32Tensor(const std::string& name, const std::vector<int32_t>& values,
                   std::vector<int64_t> shape) {
  Tensor t;
  t.name = name;
  t.datatype = TRITONSERVER_TYPE_INT32;
  t.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(values.size())} : shape;
  t.data.resize(values.size() * 4);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

Tensor Fp32Tensor(const std::string& name, const std::vector<float>& values,
                  std::vector<int64_t> shape) {
  Tensor t;
  t.name = name;
  t.datatype = TRITONSERVER_TYPE_FP32;
  t.shape = std::move(shape);
  t.data.resize(values.size() * 4);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

Tensor BytesTensor(const std::string& name, const std::vector<std::string>& values) {
  Tensor t;
  t.name = name;
  t.datatype = TRITONSERVER_TYPE_BYTES;
  t.shape = {static_cast<int64_t>(values.size())};
  for (const auto& v : values) {
    const uint32_t len = static_cast<uint32_t>(v.size());
    const char* p = reinterpret_cast<const char*>(&len);
    t.data.insert(t.data.end(), p, p + 4);
    t.data.insert(t.data.end(), v.begin(), v.end());
  }
  return t;
}

Tensor BoolTensor(const std::string& name, bool value) {
  Tensor t;
  t.name = name;
  t.datatype = TRITONSERVER_TYPE_BOOL;
  t.shape = {1};
  t.data = {static_cast<char>(value ? 1 : 0)};
  return t;
}

std::vector<int32_t> Int32Values(const Tensor& t) {
  std::vector<int32_t> out(t.data.size() / 4);
  std::memcpy(out.data(), t.data.data(), out.size() * 4);
  return out;
}

std::vector<std::string> BytesValues(const Tensor& t) {
  std::vector<std::string> out;
  size_t offset = 0;
  while (offset + 4 <= t.data.size()) {
    uint32_t len = 0;
    std::memcpy(&len, t.data.data() + offset, 4);
    offset += 4;
    out.emplace_back(t.data.data() + offset, len);
    offset += len;
  }
  return out;
}

const Tensor* FindOutput(const InferResponse& r, const std::string& name) {
  for (const auto& t : r.outputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

ResponseCallback Collector::Callback() {
  auto state = state_;
  return [state](InferResponse r) {
    std::lock_guard lock(state->mu);
    if (r.is_final) ++state->num_final;
    state->responses.push_back(std::move(r));
    state->cv.notify_all();
  };
}

bool Collector::WaitFinal(std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mu);
  return state_->cv.wait_for(lock, timeout, [&] { return state_->num_final > 0; });
}

bool Collector::WaitCount(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mu);
  return state_->cv.wait_for(lock, timeout, [&] { return state_->responses.size() >= n; });
}

std::vector<InferResponse> Collector::Responses() {
  std::lock_guard lock(state_->mu);
  return state_->responses;
}

int Collector::NumFinal() {
  std::lock_guard lock(state_->mu);
  return state_->num_final;
}

}  // namespace inflight::server::testing
