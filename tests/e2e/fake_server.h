// A Server core stand-in for testing the HTTP and gRPC frontends alone: models with known
// behaviour.
//   echo    (not decoupled, no batching): INPUT0 INT32 [-1] -> OUTPUT0; optional TEXT BYTES [-1] ->
//           TEXT_OUT; optional FP16 F16_IN [-1] -> F16_OUT; the request's parameters come back as
//           the response's. Optional DELAY_MS INT32 [1] holds the answer back (cancellable).
//   stream  (decoupled, max_batch_size 4): COUNT INT32 [1], optional DELAY_MS INT32 [1], optional
//           FAIL_AT INT32 [1]; sends INDEX = 0..COUNT-1 one response each, then a flag-only FINAL;
//           at FAIL_AT it sends an error instead. Counts cancelled requests.
//   full    Infer always refuses as a full queue does.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "server/server_api.h"

namespace inflight::server::testing {

class FakeServer : public Server {
 public:
  ~FakeServer() override;

  bool IsLive() const override { return true; }
  bool IsReady() const override { return true; }
  bool ModelIsReady(const std::string& name, std::int64_t version) const override;
  std::vector<ModelIndexEntry> ModelIndex() const override;
  Result<ModelMetadata> GetModelMetadata(const std::string& name,
                                         std::int64_t version) const override;
  Result<std::string> GetModelConfigJson(const std::string& name,
                                         std::int64_t version) const override;
  Result<bool> ModelIsDecoupled(const std::string& name, std::int64_t version) const override;
  Result<std::int64_t> ModelMaxBatchSize(const std::string& name,
                                         std::int64_t version) const override;
  Result<std::shared_ptr<InflightRequest>> Infer(InferRequest request,
                                                 ResponseCallback callback) override;
  std::string MetricsText() const override;
  Result<std::string> ModelStatisticsJson(const std::string& name) const override;
  void Shutdown() override;

  int cancelled_requests() const { return cancelled_; }
  int finished_requests() const { return finished_; }
  // The last request the core accepted (to check what the frontend built from JSON).
  InferRequest last_request() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::thread> workers_;
  InferRequest last_request_;
  std::atomic<int> cancelled_{0};
  std::atomic<int> finished_{0};
};

}  // namespace inflight::server::testing
