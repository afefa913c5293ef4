#include "executor/step_profile.h"

#include <cstdlib>

#include "common/logging.h"

namespace inflight::executor {

StepProfile::StepProfile() {
  if (const char* env = std::getenv("INFLIGHT_STEP_PROFILE")) every_ = std::atoll(env);
}

void StepProfile::Mark(Phase finished) {
  const Clock::time_point now = Clock::now();
  ms_[finished] += std::chrono::duration<double, std::milli>(now - last_).count();
  last_ = now;
}

void StepProfile::AddRunnerTimes(double wait_ms, double device_ms) {
  ms_[kRunnerHost] -= wait_ms;
  ms_[kDeviceWait] += wait_ms;
  device_ms_ += device_ms;
}

void StepProfile::EndStep(std::int64_t num_sequences, std::int64_t num_context_tokens) {
  ++steps_;
  sequences_ += num_sequences;
  context_tokens_ += num_context_tokens;
  if (steps_ < every_) return;
  const double n = static_cast<double>(steps_);
  double total = 0;
  for (double v : ms_) total += v;
  LOG_INFO(
      "step profile, mean of {} steps ({:.1f} sequences, {:.0f} context tokens): {:.3f} ms = "
      "schedule {:.3f} + sampling inputs {:.3f} + runner host {:.3f} + device wait {:.3f} + "
      "outputs {:.3f} + stats {:.3f}; device busy {:.3f} ({:.1f}% of the wall time)",
      steps_, static_cast<double>(sequences_) / n, static_cast<double>(context_tokens_) / n,
      total / n, ms_[kSchedule] / n, ms_[kSamplingInputs] / n, ms_[kRunnerHost] / n,
      ms_[kDeviceWait] / n, ms_[kOutputs] / n, ms_[kStats] / n, device_ms_ / n,
      total > 0 ? 100.0 * device_ms_ / total : 0.0);
  steps_ = 0;
  sequences_ = 0;
  context_tokens_ = 0;
  ms_ = {};
  device_ms_ = 0;
}

}  // namespace inflight::executor
