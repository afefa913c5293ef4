#include "model/collectives.h"

#include <string>

namespace inflight::model {
namespace {

Status NoOtherStage(const char* what, std::int64_t count) {
  return Internal(std::string(what) + " of " + std::to_string(count) +
                  " elements in a single-process run (pp_size 1): there is no other "
                  "pipeline stage");
}

}  // namespace

Status Collectives::StartReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                                              void* stream) {
  started_receives_.push_back({buffer, count, dtype, stream});
  return Status::Ok();
}

Status Collectives::FinishReceiveFromLastStage() {
  if (started_receives_.empty()) {
    return Internal("FinishReceiveFromLastStage without a started receive");
  }
  const StartedReceive r = started_receives_.front();
  started_receives_.pop_front();
  return ReceiveFromLastStage(r.buffer, r.count, r.dtype, r.stream);
}

Status SingleProcessCollectives::SendToNextStage(const void* /*buffer*/, std::int64_t count,
                                                 DType /*dtype*/, void* /*stream*/) {
  return NoOtherStage("a send to the next stage", count);
}

Status SingleProcessCollectives::ReceiveFromPreviousStage(void* /*buffer*/, std::int64_t count,
                                                          DType /*dtype*/, void* /*stream*/) {
  return NoOtherStage("a receive from the previous stage", count);
}

Status SingleProcessCollectives::SendToFirstStage(const void* /*buffer*/, std::int64_t count,
                                                  DType /*dtype*/, void* /*stream*/) {
  return NoOtherStage("a send to the first stage", count);
}

Status SingleProcessCollectives::ReceiveFromLastStage(void* /*buffer*/, std::int64_t count,
                                                      DType /*dtype*/, void* /*stream*/) {
  return NoOtherStage("a receive from the last stage", count);
}

}  // namespace inflight::model
