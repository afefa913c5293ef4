// The public Executor: a pimpl over Executor::Impl (executor_impl.cc).
#include "inflight/executor.h"

#include "executor/executor_impl.h"

namespace inflight {

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

Result<std::unique_ptr<Executor>> Executor::Create(const std::string& engine_dir,
                                                   const ExecutorConfig& config) {
  ASSIGN_OR_RETURN(auto impl, Impl::Create(engine_dir, config));
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

Result<std::unique_ptr<Executor>> Executor::CreateWithRunner(
    const ExecutorConfig& config, std::unique_ptr<model::ModelRunner> runner) {
  ASSIGN_OR_RETURN(auto impl, Impl::CreateWithRunner(config, std::move(runner)));
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

Result<IdType> Executor::enqueueRequest(const Request& request) {
  return impl_->Enqueue(request);
}

std::vector<Result<IdType>> Executor::enqueueRequests(const std::vector<Request>& requests) {
  return impl_->EnqueueAll(requests);
}

std::vector<Response> Executor::awaitResponses(std::optional<std::chrono::milliseconds> timeout) {
  return impl_->Await(std::nullopt, timeout);
}

std::vector<Response> Executor::awaitResponses(IdType request_id,
                                               std::optional<std::chrono::milliseconds> timeout) {
  return impl_->Await(request_id, timeout);
}

void Executor::cancelRequest(IdType request_id) {
  impl_->Cancel(request_id);
}
std::deque<IterationStats> Executor::getLatestIterationStats() {
  return impl_->TakeIterationStats();
}
KvCacheStats Executor::getKvCacheStats() const {
  return impl_->kv_cache_stats();
}
SizeType Executor::vocabSize() const {
  return impl_->vocab_size();
}
SizeType Executor::maxBatchSize() const {
  return impl_->max_batch_size();
}
std::string Executor::deviceName() const {
  return impl_->device_name();
}
bool Executor::canEnqueueRequests() const {
  return impl_->accepting();
}
void Executor::shutdown() {
  impl_->Shutdown();
}

}  // namespace inflight
