// Helpers for the server core tests: options pointing at tests/backends/models and the echo
// backend in the build tree, tensor builders, and a response collector.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/server_api.h"

namespace inflight::server::testing {

ServerOptions TestOptions();
std::unique_ptr<Server> MakeServer(const ServerOptions& options);

Tensor Int32Tensor(const std::string& name, const std::vector<int32_t>& values,
                   std::vector<int64_t> shape = {});
Tensor Fp32Tensor(const std::string& name, const std::vector<float>& values,
                  std::vector<int64_t> shape);
Tensor BytesTensor(const std::string& name, const std::vector<std::string>& values);
Tensor BoolTensor(const std::string& name, bool value);
std::vector<int32_t> Int32Values(const Tensor& t);
std::vector<std::string> BytesValues(const Tensor& t);
const Tensor* FindOutput(const InferResponse& r, const std::string& name);

struct CollectorState {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<InferResponse> responses;
  int num_final = 0;
};

// Collects every response of one request.
class Collector {
 public:
  ResponseCallback Callback();
  // Waits until a final response arrived; false on timeout.
  bool WaitFinal(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Waits until at least n responses arrived.
  bool WaitCount(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  std::vector<InferResponse> Responses();
  int NumFinal();

 private:
  std::shared_ptr<CollectorState> state_ = std::make_shared<CollectorState>();
};

}  // namespace inflight::server::testing
